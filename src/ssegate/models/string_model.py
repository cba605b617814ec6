"""The ``string`` model: text in an ``encoding`` (``utf_8`` by default, or ``utf_16``), with
optional ``minLength`` and ``maxLength`` (in characters) and a ``pattern`` (a regular
expression the whole text must match, as Zilla's Java ``Pattern.matches`` does)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ssegate.config.errors import ConfigError

ENCODINGS = {"utf_8": "utf-8", "utf_16": "utf-16"}


class StringModel:
    def __init__(self, spec: Mapping[str, Any], path: str) -> None:
        self._args = (dict(spec), path)
        name = str(spec.get("encoding", "utf_8"))
        encoding = ENCODINGS.get(name)
        if encoding is None:
            raise ConfigError(
                f"{path}.encoding", f"'{name}' is not a string encoding ({', '.join(ENCODINGS)})"
            )
        self.encoding = encoding
        self.min_length = _length(spec, "minLength", path)
        self.max_length = _length(spec, "maxLength", path)
        pattern = spec.get("pattern")
        try:
            self.pattern = None if pattern is None else re.compile(str(pattern))
        except re.error as exc:
            raise ConfigError(f"{path}.pattern", f"not a regular expression: {exc}") from None

    def __reduce__(self) -> tuple[Any, ...]:
        return (StringModel, self._args)

    def validate(self, data: bytes) -> str | None:
        try:
            text = data.decode(self.encoding)
        except UnicodeDecodeError as exc:
            return f"not {self.encoding} text: {exc.reason} at byte {exc.start}"
        if self.min_length is not None and len(text) < self.min_length:
            return f"{len(text)} characters, fewer than minLength {self.min_length}"
        if self.max_length is not None and len(text) > self.max_length:
            return f"{len(text)} characters, more than maxLength {self.max_length}"
        if self.pattern is not None and self.pattern.fullmatch(text) is None:
            return f"does not match pattern {self.pattern.pattern!r}"
        return None

    def to_text(self, data: bytes) -> str:
        return data.decode(self.encoding, "replace")


def _length(spec: Mapping[str, Any], key: str, path: str) -> int | None:
    value = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{path}.{key}", f"{value!r} is not a non-negative whole number")
    return value

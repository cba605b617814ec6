"""Checking a parsed ``zilla.yaml`` against its JSON Schema, with errors a person can act on.

The schema is assembled from the parts that own each option (:mod:`ssegate.config.schema`).
Every binding's ``type`` and ``kind`` are checked here first, by hand: a wrong type or kind would
otherwise surface as a pile of unrelated schema failures. Bindings that fail that check are left
out of the schema pass. Every remaining schema failure becomes one :class:`ConfigError` whose
path is the dotted YAML path (``bindings.north_tls_server.options.alpn[0]``); all of them are
raised together, sorted by path, as :class:`ConfigErrors`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

from jsonschema import Draft201909Validator
from jsonschema.exceptions import ValidationError

from ssegate.config.errors import ConfigError, ConfigErrors
from ssegate.config.schema import schema as schema
from ssegate.config.unsupported import is_zilla_binding_type, zilla_only_sections


@cache
def _validator() -> Any:
    return Draft201909Validator(schema())


def binding_kinds() -> dict[str, tuple[str, ...]]:
    """Every binding type ssegate runs, with its kinds, read from the schema's ``$defs``."""
    kinds: dict[str, list[str]] = {}
    for key in schema()["$defs"]["bindings"]:
        type_, _, kind = key.partition(".")
        kinds.setdefault(type_, []).append(kind)
    return {type_: tuple(names) for type_, names in kinds.items()}


def validate_document(document: Mapping[str, Any]) -> None:
    """Raise :class:`ConfigErrors` listing every problem the schema finds in ``document``."""
    errors, bad_bindings = check_binding_types(document.get("bindings"))
    zilla_only = zilla_only_sections(document)
    errors.extend(zilla_only)
    checked = {k: v for k, v in document.items() if k not in {e.path for e in zilla_only}}
    if bad_bindings and isinstance(checked.get("bindings"), Mapping):
        checked["bindings"] = {
            name: value for name, value in checked["bindings"].items() if name not in bad_bindings
        }
    for error in _validator().iter_errors(checked):
        errors.extend(describe(error))
    if errors:
        raise ConfigErrors(sorted_unique(errors))


def check_binding_types(bindings: object) -> tuple[list[ConfigError], set[str]]:
    """Errors for bindings whose ``type`` or ``kind`` ssegate cannot use, and their names."""
    errors: list[ConfigError] = []
    bad: set[str] = set()
    if not isinstance(bindings, Mapping):
        return errors, bad
    kinds = binding_kinds()
    supported = ", ".join(kinds)
    for name, binding in bindings.items():
        if not isinstance(binding, Mapping):
            continue
        path = f"bindings.{name}"
        type_ = binding.get("type")
        kind = binding.get("kind")
        if type_ is None:
            errors.append(ConfigError(f"{path}.type", f"required but missing (use: {supported})"))
        elif not isinstance(type_, str) or type_ not in kinds:
            errors.append(ConfigError(f"{path}.type", _unknown_type(type_, kinds)))
        elif kind is None:
            use = ", ".join(kinds[type_])
            errors.append(ConfigError(f"{path}.kind", f"required but missing (use: {use})"))
        elif kind not in kinds[type_]:
            use = ", ".join(kinds[type_])
            message = f"{kind!r} is not a kind of {type_!r} (use: {use})"
            errors.append(ConfigError(f"{path}.kind", message))
        else:
            continue
        bad.add(name)
    return errors, bad


def _unknown_type(type_: object, kinds: Mapping[str, tuple[str, ...]]) -> str:
    supported = ", ".join(kinds)
    if is_zilla_binding_type(type_):
        unsupported = f"{type_!r} is a Zilla binding type that ssegate does not run"
        return f"{unsupported} (supported: {supported})"
    return f"{type_!r} is not a binding type{_did_you_mean(type_, kinds)} (supported: {supported})"


def _did_you_mean(word: object, choices: Iterable[str]) -> str:
    if not isinstance(word, str):
        return ""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.7)
    return f"; did you mean {close[0]!r}?" if close else ""


def describe(error: ValidationError) -> list[ConfigError]:
    """One schema failure as ``ConfigError``s with YAML paths (several for unexpected keys)."""
    parts = list(error.absolute_path)
    path = yaml_path(parts)
    keyword = error.validator
    rule: Any = error.validator_value
    instance = error.instance
    subschema: Any = error.schema
    if "propertyNames" in error.absolute_schema_path:
        rule_text = subschema.get("description", "") if isinstance(subschema, dict) else ""
        message = f"{instance!r} is not a valid name" + (f" ({rule_text})" if rule_text else "")
        return [ConfigError(yaml_path([*parts, str(instance)]), message)]
    if keyword == "additionalProperties" and rule is False and isinstance(instance, Mapping):
        return _unexpected_keys(parts, instance, subschema)
    if keyword == "required":
        missing = [name for name in rule if name not in instance]
        return [ConfigError(yaml_path([*parts, name]), "required but missing") for name in missing]
    if keyword == "type":
        return [ConfigError(path, f"expected {_type_names(rule)}, got {_what(instance)}")]
    if keyword in ("oneOf", "anyOf", "pattern") and isinstance(subschema, dict):
        if "description" in subschema:
            return [ConfigError(path, f"{_short(instance)} is not {subschema['description']}")]
        if error.context:
            deepest = max(error.context, key=lambda e: len(e.absolute_path))
            if len(deepest.absolute_path) > len(parts):
                return describe(deepest)
    return [ConfigError(path, error.message)]


def _unexpected_keys(
    parts: list[str | int], instance: Mapping[str, Any], subschema: Mapping[str, Any]
) -> list[ConfigError]:
    allowed = list(subschema.get("properties", {}))
    errors = []
    for key in instance:
        if key in allowed:
            continue
        hint = _did_you_mean(key, allowed)
        listing = f" (allowed: {', '.join(allowed)})" if allowed else ""
        errors.append(
            ConfigError(yaml_path([*parts, key]), f"{key!r} is not allowed here{hint}{listing}")
        )
    return errors


_TYPE_NAMES = {
    "string": "a string",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
    "object": "a mapping",
    "array": "a list",
    "null": "nothing",
}


def _type_names(rule: str | list[str]) -> str:
    names = [rule] if isinstance(rule, str) else list(rule)
    return " or ".join(_TYPE_NAMES.get(name, name) for name in names)


def _what(instance: object) -> str:
    if isinstance(instance, Mapping):
        return "a mapping"
    if isinstance(instance, list):
        return "a list"
    if instance is None:
        return "nothing"
    return _short(instance)


def _short(instance: object) -> str:
    text = repr(instance)
    return text if len(text) <= 60 else text[:57] + "..."


_PLAIN_KEY = re.compile(r"^[^.\[\]\s]+$")


def yaml_path(parts: Iterable[object]) -> str:
    """``['bindings', 'x', 'routes', 1, 'exit']`` → ``bindings.x.routes[1].exit``.

    A key YAML read as something else than a string (``~``, ``1.5``, a date) is shown as its
    Python value in brackets, like a key that is not a plain word.
    """
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        elif isinstance(part, str) and _PLAIN_KEY.match(part):
            text += f".{part}" if text else part
        else:
            text += f"[{part!r}]"
    return text


def _natural(path: str) -> list[tuple[int, int | str]]:
    return [
        (1, int(piece)) if piece.isascii() and piece.isdigit() else (0, piece)
        for piece in re.split(r"([0-9]+)", path)
    ]


def sorted_unique(errors: Iterable[ConfigError]) -> list[ConfigError]:
    """Errors without repeats, ordered by path (``routes[2]`` before ``routes[10]``)."""
    seen: dict[str, ConfigError] = {}
    for error in errors:
        seen.setdefault(str(error), error)
    return sorted(seen.values(), key=lambda e: (_natural(e.path), e.message))

"""Reading ``zilla.yaml``: file, environment expressions, YAML, schema, then the binding graph.

The order is Zilla's: ``${{ env.NAME }}`` expressions are replaced in the raw text before the
YAML is parsed, so a value may sit anywhere, quoted or not. Other ``${...}`` expressions
(``${params.path}``, ``${guarded['jwt'].identity}``) belong to bindings and are left alone.

Every failure is a :class:`ConfigError` naming where it is: the file, ``line 5, column 3`` for
YAML syntax, or the dotted YAML path (``vaults.my_servers.options.keys.password``) for a value.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from ssegate.config.errors import ConfigError, ConfigErrors
from ssegate.config.model import Config
from ssegate.config.resolve import resolve
from ssegate.config.validate import validate_document, yaml_path

ENV_EXPRESSION = re.compile(r"\$\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
"""``${{env.NAME}}``, with optional spaces inside the braces."""


def load_config(path: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> Config:
    """Read, check and resolve the config file at ``path``. Raises :class:`ConfigError`."""
    source = os.fspath(path)
    try:
        with open(source, "rb") as file:
            raw = file.read()
    except OSError as exc:
        raise ConfigError(source, f"cannot read the config file: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        message = f"the config file is not UTF-8 text (byte {exc.start})"
        raise ConfigError(source, message) from None
    base_dir = os.path.dirname(os.path.abspath(source))
    return load_config_text(text, source=source, base_dir=base_dir, env=env)


def load_config_text(
    text: str,
    *,
    source: str = "<config>",
    base_dir: str = ".",
    env: Mapping[str, str] | None = None,
) -> Config:
    """Check and resolve a config given as text; ``source`` names it in messages."""
    document = parse_document(text, source=source, env=env)
    validate_document(document)
    if any(b.get("type") == "asyncapi" for b in (document.get("bindings") or {}).values()):
        from ssegate.asyncapi.expand import expand_asyncapi

        document = expand_asyncapi(document, base_dir=base_dir)
    return resolve(document, source=source, base_dir=base_dir)


def parse_document(
    text: str, *, source: str = "<config>", env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The YAML document as plain values, environment expressions substituted."""
    substituted, unset = substitute_env(text, os.environ if env is None else env)
    try:
        document = _parse_yaml(substituted)
    except yaml.MarkedYAMLError as exc:
        raise ConfigErrors([*_unset_by_line(unset), _syntax_error(exc)]) from None
    except yaml.YAMLError as exc:
        raise ConfigErrors([*_unset_by_line(unset), ConfigError("", str(exc))]) from None
    if unset:
        errors = _unset_in_document(document, unset)
        if errors:
            raise ConfigErrors(errors)
    if document is None:
        raise ConfigError(source, "the config is empty; it needs at least 'name' and 'bindings'")
    if not isinstance(document, dict):
        kind = "a list" if isinstance(document, list) else repr(document)
        raise ConfigError(source, f"the config must be a mapping of top-level keys, not {kind}")
    return document


@dataclass(frozen=True, slots=True)
class UnsetVariable:
    """An ``${{env.NAME}}`` whose variable is not set; ``marker`` stands in for it in the text."""

    name: str
    line: int
    marker: str


def substitute_env(text: str, env: Mapping[str, str]) -> tuple[str, list[UnsetVariable]]:
    """Replace every ``${{env.NAME}}``; unset ones become unique markers so they can be located."""
    unset: list[UnsetVariable] = []
    nonce = secrets.token_hex(4)

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in env:
            return env[name]
        line = text.count("\n", 0, match.start()) + 1
        marker = f"ssegate-unset-{nonce}-{len(unset)}"
        unset.append(UnsetVariable(name, line, marker))
        return marker

    return ENV_EXPRESSION.sub(replace, text), unset


def _unset_message(variable: UnsetVariable) -> str:
    return f"environment variable {variable.name!r} is not set"


def _unset_by_line(unset: list[UnsetVariable]) -> list[ConfigError]:
    return [ConfigError(f"line {v.line}", _unset_message(v)) for v in unset]


def _unset_in_document(document: object, unset: list[UnsetVariable]) -> list[ConfigError]:
    """Errors for the unset variables that reached a value; ones inside comments do not count."""
    errors = []
    for parts, value in _strings(document, []):
        for variable in unset:
            if variable.marker in value:
                path = yaml_path(parts) or f"line {variable.line}"
                errors.append(
                    ConfigError(path, f"{_unset_message(variable)} (line {variable.line})")
                )
    return errors


def _strings(value: object, parts: list[str | int]) -> Iterator[tuple[list[str | int], str]]:
    if isinstance(value, str):
        yield parts, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key, parts)
            yield from _strings(item, [*parts, str(key)])
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, [*parts, index])


def _syntax_error(exc: yaml.MarkedYAMLError) -> ConfigError:
    mark = exc.problem_mark or exc.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = exc.problem or "invalid YAML"
    if exc.context and exc.context_mark and exc.context_mark is not mark:
        problem = f"{problem} ({exc.context} at line {exc.context_mark.line + 1})"
    return ConfigError(where, problem)


class _StrictLoader(yaml.SafeLoader):
    """The safe loader, refusing a key that appears twice in one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_seen: dict[object, yaml.Node] = {}
        for key_node, _ in node.value:
            if (
                not isinstance(key_node, yaml.ScalarNode)
                or key_node.tag == "tag:yaml.org,2002:merge"
            ):
                continue
            key = self.construct_object(key_node)
            if key in first_seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key {key!r} (first at line {first_seen[key].start_mark.line + 1})",
                    key_node.start_mark,
                )
            first_seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


def _parse_yaml(text: str) -> object:
    return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass

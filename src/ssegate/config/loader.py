"""Reading ``zilla.yaml``: file, environment expressions, YAML, schema, then the binding graph.

The order is Zilla's: ``${{ env.NAME }}`` expressions are replaced in the raw text before the
YAML is parsed, so a value may sit anywhere, quoted or not. Other ``${...}`` expressions
(``${params.path}``, ``${guarded['jwt'].identity}``) belong to bindings and are left alone.
Every other ``${{`` (``${{env.}}``, an unclosed ``${{env.WWW_DIR``) is an error, like an unset
variable: each is replaced by a marker of its own (``ssegate-env-<nonce>-<n>-``) and reported at
the YAML path where its marker lands; one inside a comment does not matter.

Reading is bounded (:mod:`ssegate.config.yaml_reader`): the file's size, how deep values nest
and how far aliases expand each have a limit, and a config over one is refused before it costs
more than reading its text. The size limit holds again once environment expressions are
substituted, so a large variable cannot carry the config past it.

A binding type that stands for other bindings (``asyncapi``: its specs become http, sse,
sse-kafka and kafka bindings) is expanded before the document is resolved, by the expander
registered for it (:func:`register_expander`). The layer that owns such a type registers it at
start-up (:func:`ssegate.cli.register_expanders`); this package imports none of them.

Every failure is a :class:`ConfigError` naming where it is: the file, ``line 5, column 3`` for
YAML syntax, or the dotted YAML path (``vaults.my_servers.options.keys.password``) for a value.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import yaml

from ssegate.config.errors import ConfigError, ConfigErrors
from ssegate.config.model import Config
from ssegate.config.resolve import resolve
from ssegate.config.validate import validate_document, yaml_path
from ssegate.config.yaml_reader import (
    DEFAULT_LIMITS,
    ConfigLimits,
    check_size,
    located,
    parse_yaml,
    read_text,
)

ENV_EXPRESSION = re.compile(r"\$\{\{(?:\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\})?")
"""``${{env.NAME}}``, with optional spaces inside the braces; a bare ``${{`` is malformed."""
_MALFORMED_TEXT = re.compile(r"\$\{\{[^\n]*?(?:\}\}|$)", re.MULTILINE)
"""What a malformed expression shows in its error: up to ``}}`` or the end of the line."""
_MARKER = re.compile(r"ssegate-env-[0-9a-f]{8}-[0-9]+-")
_SHOWN_CHARS = 80


class Expander(Protocol):
    """What turns a schema-checked document's bindings of one type into the bindings they stand
    for; raises :class:`ConfigError`."""

    def __call__(self, document: Mapping[str, Any], *, base_dir: str) -> dict[str, Any]: ...


EXPANDERS: dict[str, Expander] = {}
"""Binding ``type`` → its expander, run when a document has a binding of that type."""


def register_expander(binding_type: str, expander: Expander) -> None:
    """Expand the bindings of ``binding_type`` with ``expander`` in every document loaded."""
    EXPANDERS[binding_type] = expander


def load_config(
    path: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
    *,
    limits: ConfigLimits = DEFAULT_LIMITS,
) -> Config:
    """Read, check and resolve the config file at ``path``. Raises :class:`ConfigError`."""
    source = os.fspath(path)
    text = read_text(source, "config file", limits)
    base_dir = os.path.dirname(os.path.abspath(source))
    return load_config_text(text, source=source, base_dir=base_dir, env=env, limits=limits)


def load_config_text(
    text: str,
    *,
    source: str = "<config>",
    base_dir: str = ".",
    env: Mapping[str, str] | None = None,
    limits: ConfigLimits = DEFAULT_LIMITS,
) -> Config:
    """Check and resolve a config given as text; ``source`` names it in messages."""
    document = parse_document(text, source=source, env=env, limits=limits)
    validate_document(document)
    types = {b.get("type") for b in (document.get("bindings") or {}).values()}
    for binding_type, expand in EXPANDERS.items():
        if binding_type in types:
            document = expand(document, base_dir=base_dir)
    return resolve(document, source=source, base_dir=base_dir)


def parse_document(
    text: str,
    *,
    source: str = "<config>",
    env: Mapping[str, str] | None = None,
    limits: ConfigLimits = DEFAULT_LIMITS,
) -> dict[str, Any]:
    """The YAML document as plain values, environment expressions substituted."""
    check_size(len(text.encode("utf-8", "surrogatepass")), source, limits)
    substituted, problems = substitute_env(text, os.environ if env is None else env)
    if len(substituted) != len(text):
        check_size(
            len(substituted.encode("utf-8", "surrogatepass")),
            source,
            limits,
            "config, its environment expressions substituted,",
        )
    try:
        document = parse_yaml(substituted, limits)
    except yaml.MarkedYAMLError as exc:
        raise ConfigErrors([*_problems_by_line(problems), _syntax_error(exc)]) from None
    except yaml.YAMLError as exc:
        raise ConfigErrors([*_problems_by_line(problems), ConfigError("", str(exc))]) from None
    if problems:
        errors = _problems_in_document(document, problems)
        if errors:
            raise ConfigErrors(errors)
    if document is None:
        raise ConfigError(source, "the config is empty; it needs at least 'name' and 'bindings'")
    if not isinstance(document, dict):
        kind = "a list" if isinstance(document, list) else repr(document)
        raise ConfigError(source, f"the config must be a mapping of top-level keys, not {kind}")
    return document


@dataclass(frozen=True, slots=True)
class EnvProblem:
    """An ``${{...}}`` that cannot be substituted; ``marker`` stands in for it in the text."""

    message: str
    line: int
    marker: str


def substitute_env(text: str, env: Mapping[str, str]) -> tuple[str, list[EnvProblem]]:
    """Replace every ``${{env.NAME}}``; unset and malformed ones become markers to locate.

    An unset variable's marker takes the whole expression's place; a malformed expression's
    marker takes only its ``${{``, so the text after it (an unclosed ``${{env.A`` has no end)
    stays where it was.
    """
    problems: list[EnvProblem] = []
    nonce = secrets.token_hex(4)

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is not None and name in env:
            return env[name]
        if name is not None:
            message = f"environment variable {name!r} is not set"
        else:
            shown = _MALFORMED_TEXT.match(text, match.start())
            written = shown.group(0).strip() if shown else match.group(0)
            if len(written) > _SHOWN_CHARS:
                written = written[:_SHOWN_CHARS] + "..."
            message = f"{written!r} is not an environment expression ${{{{env.NAME}}}}"
        marker = f"ssegate-env-{nonce}-{len(problems)}-"
        problems.append(EnvProblem(message, text.count("\n", 0, match.start()) + 1, marker))
        return marker

    return ENV_EXPRESSION.sub(replace, text), problems


def _problems_by_line(problems: list[EnvProblem]) -> list[ConfigError]:
    return [ConfigError(f"line {p.line}", p.message) for p in problems]


def _problems_in_document(document: object, problems: list[EnvProblem]) -> list[ConfigError]:
    """Errors for the problems whose marker reached a value; ones inside comments do not count."""
    by_marker = {problem.marker: problem for problem in problems}
    errors = []
    for parts, value in _strings(document, []):
        for found in _MARKER.findall(value):
            problem = by_marker.get(found)
            if problem is not None:
                path = yaml_path(parts) or f"line {problem.line}"
                errors.append(ConfigError(path, f"{problem.message} (line {problem.line})"))
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
    return ConfigError(*located(exc))

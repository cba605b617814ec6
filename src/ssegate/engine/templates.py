"""Route ``with`` values: text with ``${...}`` expressions, compiled once, rendered per request.

Three expressions exist:

- ``${params.name}``: parameter ``name`` captured by the route's ``when`` pattern;
- ``${guarded['g'].identity}``: the identity guard ``g`` established (``"g"`` quotes work too);
- ``${guarded['g'].attributes.name}``: attribute ``name`` of that identity.

Everything else is literal text, a ``$`` that does not start ``${`` included. An expression
that is none of the above is a :class:`~ssegate.config.errors.ConfigError` when the template is
compiled; a value that is missing when it is rendered raises :class:`MissingTemplateValue`.

The guarded values are what the request's guards established
(:class:`~ssegate.contract.identity.Identity`, by guard name), whatever the guards' type.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ssegate.config.errors import ConfigError
from ssegate.contract.identity import Authorization, Identity

_EXPRESSION = re.compile(r"\$\{([^{}]*)\}")
_PARAM = re.compile(r"\s*params\.([A-Za-z_][A-Za-z0-9_]*)\s*")
_ATTRIBUTE = r"[A-Za-z_][A-Za-z0-9_\-]*"
_GUARDED = re.compile(
    rf"""\s*guarded\[\s*(?:'([^']+)'|"([^"]+)")\s*\]\.(identity|attributes\.({_ATTRIBUTE}))\s*"""
)


class MissingTemplateValue(KeyError):
    """A ``${...}`` value was not there when the template was rendered."""

    def __init__(self, expression: str, reason: str) -> None:
        super().__init__(expression)
        self.expression = expression
        self.reason = reason

    def __str__(self) -> str:
        return f"${{{self.expression}}}: {self.reason}"


@dataclass(frozen=True, slots=True)
class _Literal:
    text: str


@dataclass(frozen=True, slots=True)
class _Param:
    expression: str
    name: str


@dataclass(frozen=True, slots=True)
class _Guarded:
    expression: str
    guard: str
    attribute: str | None
    """``None`` for ``.identity``."""


_Part = _Literal | _Param | _Guarded


class Template:
    """A compiled ``with`` value."""

    __slots__ = ("_parts", "text")

    def __init__(self, text: str, parts: tuple[_Part, ...]) -> None:
        self.text = text
        self._parts = parts

    @classmethod
    def compile(cls, text: str, path: str) -> Template:
        """Compile ``text`` found at YAML path ``path``."""
        parts: list[_Part] = []
        position = 0
        for found in _EXPRESSION.finditer(text):
            if found.start() > position:
                parts.append(_Literal(text[position : found.start()]))
            parts.append(_compile_expression(found.group(1), text, path))
            position = found.end()
        rest = text[position:]
        if "${" in rest:
            raise ConfigError(path, f"'${{' without a closing '}}' in '{text}'")
        if rest:
            parts.append(_Literal(rest))
        return cls(text, tuple(parts))

    @property
    def is_static(self) -> bool:
        """True when the template has no expressions: it always renders to the same text."""
        return all(isinstance(part, _Literal) for part in self._parts)

    @property
    def param_names(self) -> frozenset[str]:
        """The ``params`` the template reads (to check against the route's patterns)."""
        return frozenset(part.name for part in self._parts if isinstance(part, _Param))

    @property
    def guard_names(self) -> frozenset[str]:
        """The guards whose identity the template reads."""
        return frozenset(part.guard for part in self._parts if isinstance(part, _Guarded))

    def render(
        self, params: Mapping[str, str], guarded: Mapping[str, Authorization] | None = None
    ) -> str:
        """The rendered text; raises :class:`MissingTemplateValue` when a value is absent."""
        out: list[str] = []
        for part in self._parts:
            if isinstance(part, _Literal):
                out.append(part.text)
            elif isinstance(part, _Param):
                value = params.get(part.name)
                if value is None:
                    raise MissingTemplateValue(part.expression, f"no parameter '{part.name}'")
                out.append(value)
            else:
                out.append(_render_guarded(part, guarded))
        return "".join(out)

    def __repr__(self) -> str:
        return f"Template({self.text!r})"


def _compile_expression(expression: str, text: str, path: str) -> _Part:
    param = _PARAM.fullmatch(expression)
    if param is not None:
        return _Param(expression.strip(), param.group(1))
    guarded = _GUARDED.fullmatch(expression)
    if guarded is not None:
        guard = guarded.group(1) or guarded.group(2)
        return _Guarded(expression.strip(), guard, guarded.group(4))
    raise ConfigError(
        path,
        f"unknown expression '${{{expression}}}' in '{text}'; expected ${{params.<name>}}, "
        "${guarded['<guard>'].identity} or ${guarded['<guard>'].attributes.<name>}",
    )


def _render_guarded(part: _Guarded, guarded: Mapping[str, Authorization] | None) -> str:
    identity = None if guarded is None else guarded.get(part.guard)
    if not isinstance(identity, Identity):
        raise MissingTemplateValue(part.expression, f"guard '{part.guard}' has no identity")
    if part.attribute is None:
        return identity.identity
    value = identity.attributes.get(part.attribute)
    if value is None:
        raise MissingTemplateValue(part.expression, f"no attribute '{part.attribute}'")
    return value

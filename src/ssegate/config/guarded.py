"""A route's ``guarded``: the guards it asks and the roles each must find, compiled once.

Role names may hold Zilla's request expressions, evaluated per request:

- ``${method}``: the request's method (``GET``);
- ``${path}``: the request's path, without its query string (``/events``).

``guarded: {authn_jwt: ["${method}${path}"]}`` asks a GET of ``/events?lastEventId=7`` for a
token with the role ``GET/events``. Zilla puts the ``:path`` header there, query included, so a
resume id or an ``?access_token=`` would become part of the role; ssegate leaves the query out,
as its routes do. Any other ``${...}`` in a role name (``${params.id}``, ``${guarded[...]}``) is
a config error naming its YAML path (``bindings.x.routes[0].guarded.authn_jwt[0]``): Zilla would
have taken it as literal text that no token holds, and refused every request.

This is the requirement as the config states it; :class:`~ssegate.guards.guarded.Guarded` checks
a request against it with the built guards.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Self

from ssegate.config.errors import ConfigError
from ssegate.contract.exchange import Request

EXPRESSIONS = ("method", "path")
"""The names a role expression may use."""

_EXPRESSION = re.compile(r"\$\{([^{}]*)\}")


@dataclass(frozen=True, slots=True)
class RoleName:
    """One role name: literal text, or text with ``${method}``/``${path}`` in it."""

    parts: tuple[str, ...]
    """Literal text and expression names, alternating (literal first; even indexes)."""

    @classmethod
    def compile(cls, text: str, where: str) -> RoleName:
        """Compile ``text``; an unknown or malformed expression raises ``ConfigError(where)``."""
        parts: list[str] = []
        position = 0
        for found in _EXPRESSION.finditer(text):
            name = found.group(1).strip()
            if name not in EXPRESSIONS:
                raise ConfigError(
                    where,
                    f"'{found.group(0)}' is not a role expression"
                    " (role names may use ${method} and ${path})",
                )
            parts += [text[position : found.start()], name]
            position = found.end()
        rest = text[position:]
        if "${" in rest:
            raise ConfigError(where, f"'{text}' opens '${{' without closing it")
        parts.append(rest)
        return cls(tuple(parts))

    @property
    def literal(self) -> str | None:
        """The name itself when it has no expression."""
        return self.parts[0] if len(self.parts) == 1 else None

    def render(self, request: Request) -> str:
        out = []
        for index, part in enumerate(self.parts):
            if index % 2 == 0:
                out.append(part)
            else:
                out.append(request.method if part == "method" else request.path)
        return "".join(out)


class GuardedRoles:
    """A route's ``guarded``, compiled: guard name → the role names it must find."""

    __slots__ = ("_fixed", "_roles")

    def __init__(self, roles: Mapping[str, Sequence[RoleName]] | None = None) -> None:
        self._roles = {guard: tuple(names) for guard, names in (roles or {}).items()}
        fixed: dict[str, frozenset[str]] = {}
        for guard, names in self._roles.items():
            literals = [name.literal for name in names]
            if all(literal is not None for literal in literals):
                fixed[guard] = frozenset(literal for literal in literals if literal is not None)
        self._fixed = fixed if len(fixed) == len(self._roles) else None
        """The roles asked for when no name has an expression (the same for every request)."""

    @classmethod
    def compile(cls, guarded: Mapping[str, Sequence[str]] | None, where: str) -> Self:
        """Compile a route's ``guarded`` (the schema's: guard name → list of role names) found
        at YAML path ``where``; raises ConfigError for a role expression it cannot read."""
        roles: dict[str, list[RoleName]] = {}
        for guard, names in (guarded or {}).items():
            roles[str(guard)] = [
                RoleName.compile(name, f"{where}.{guard}[{index}]")
                for index, name in enumerate(names)
            ]
        return cls(roles)

    def __bool__(self) -> bool:
        return bool(self._roles)

    def __iter__(self) -> Iterator[str]:
        """The guard names."""
        return iter(self._roles)

    def __contains__(self, guard: object) -> bool:
        return guard in self._roles

    def required(self, request: Request) -> Mapping[str, frozenset[str]]:
        """Guard → the roles ``request`` must hold under it."""
        if self._fixed is not None:
            return self._fixed
        return {
            guard: frozenset(name.render(request) for name in names)
            for guard, names in self._roles.items()
        }

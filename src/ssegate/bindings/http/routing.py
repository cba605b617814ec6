"""Route patterns and the http server's route table.

A pattern is literal text with two kinds of holes, compiled once to a regular expression:

- ``*`` matches any run of characters, ``/`` included, possibly empty;
- ``{name}`` captures one or more characters as parameter ``name``. The last hole of a
  pattern is greedy, so ``/{path}`` on ``/css/app.css`` gives ``path='css/app.css'``; a
  ``{name}`` with literal text after it stops at the first place where the rest still
  matches, so ``/{a}-{b}`` on ``/x-y-z`` gives ``a='x'``, ``b='y-z'``.

Everything else is matched exactly. As in Zilla a parameter needs at least one character, so
``/{path}`` does not match ``/``.

:class:`HttpRoutes` holds an http server's routes. Each route's ``when`` is a list of
``{headers: {name: pattern}}`` entries: the entries are alternatives (any one may match) and
the headers inside one entry must all match. Header names compare case-insensitively; the
pseudo-headers ``:scheme``, ``:authority``, ``:path`` and ``:method`` read the request line.
``:path`` is matched against the path with its query string removed, which is how Zilla's
"also matches when a query string follows" comes out for every pattern. A route without
``when`` matches every request. Routes are tried in order; guards are not looked at here (the
server walks :meth:`HttpRoutes.candidates` to tell "no route" from "not allowed"), but each
route's ``guarded`` is compiled with it (role expressions, :mod:`ssegate.guards.guarded`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding, Route
from ssegate.contract.exchange import Request
from ssegate.guards.guarded import Guarded

_HOLE = re.compile(r"\*|\{([^{}]*)\}")
_PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
PSEUDO_HEADERS = (":scheme", ":authority", ":path", ":method")


class Pattern:
    """A compiled route pattern (see the module docstring for its rules)."""

    __slots__ = ("_regex", "params", "text")

    def __init__(self, text: str, regex: re.Pattern[str], params: tuple[str, ...]) -> None:
        self.text = text
        self._regex = regex
        self.params = params
        """Names of the parameters the pattern captures, in order."""

    @classmethod
    def compile(cls, text: str, path: str = "") -> Pattern:
        """Compile ``text``; a malformed ``{...}`` raises ``ConfigError(path, ...)``."""
        holes = list(_HOLE.finditer(text))
        parts: list[str] = []
        params: list[str] = []
        position = 0
        for index, hole in enumerate(holes):
            parts.append(re.escape(text[position : hole.start()]))
            position = hole.end()
            last = index == len(holes) - 1 and position == len(text)
            if hole.group(0) == "*":
                parts.append(".*")
                continue
            name = hole.group(1)
            if not _PARAM_NAME.fullmatch(name):
                raise ConfigError(path, f"'{{{name}}}' in pattern '{text}' is not a parameter name")
            if name in params:
                raise ConfigError(path, f"parameter '{name}' appears twice in pattern '{text}'")
            params.append(name)
            parts.append(f"(?P<{name}>.+)" if last else f"(?P<{name}>.+?)")
        rest = text[position:]
        if "{" in rest or "}" in rest:
            raise ConfigError(path, f"unbalanced brace in pattern '{text}'")
        parts.append(re.escape(rest))
        return cls(text, re.compile("".join(parts), re.DOTALL), tuple(params))

    def match(self, value: str) -> dict[str, str] | None:
        """The captured parameters when ``value`` matches the whole pattern, else ``None``."""
        found = self._regex.fullmatch(value)
        return None if found is None else found.groupdict()

    def __repr__(self) -> str:
        return f"Pattern({self.text!r})"


class RouteMatch(NamedTuple):
    """A route that matched a request, the parameters its ``when`` captured, and its compiled
    ``guarded``.

    ``exit``, ``guarded`` and ``with_`` read through to the route, so a caller can use a match
    where it would use the route.
    """

    route: Route
    params: dict[str, str]
    guards: Guarded

    @property
    def exit(self) -> str | None:
        return self.route.exit

    @property
    def guarded(self) -> dict[str, list[str]]:
        return self.route.guarded

    @property
    def with_(self) -> dict[str, Any] | None:
        return self.route.with_


class Condition(Protocol):
    """One ``when`` entry of a route: the parameters it captures from a request it matches."""

    def match(self, request: Request) -> dict[str, str] | None: ...


def first_match(conditions: Sequence[Condition], request: Request) -> dict[str, str] | None:
    """The parameters of the first of a route's ``when`` entries that ``request`` matches;
    ``{}`` for a route with none (it takes every request), ``None`` when none matches."""
    if not conditions:
        return {}
    for condition in conditions:
        params = condition.match(request)
        if params is not None:
            return params
    return None


class _HeaderCondition:
    """One ``when`` entry: header name → pattern, all of which must match."""

    __slots__ = ("checks",)

    def __init__(self, checks: list[tuple[str, Pattern]]) -> None:
        # ``:path`` first: it is the most selective and the one that captures parameters.
        self.checks = sorted(checks, key=lambda check: check[0] != ":path")

    def match(self, request: Request) -> dict[str, str] | None:
        params: dict[str, str] = {}
        for name, pattern in self.checks:
            value = header_value(request, name)
            if value is None:
                return None
            captured = pattern.match(value)
            if captured is None:
                return None
            params.update(captured)
        return params


def header_value(request: Request, name: str) -> str | None:
    """A request header by name; the pseudo-headers ``:path`` (without the query),
    ``:method``, ``:scheme`` and ``:authority`` read the request line."""
    if name == ":path":
        return request.path
    if name == ":method":
        return request.method
    if name == ":scheme":
        return request.scheme
    if name == ":authority":
        return request.authority
    return request.headers.get(name)


class _CompiledRoute:
    __slots__ = ("conditions", "guards", "route")

    def __init__(self, route: Route, conditions: list[_HeaderCondition], path: str) -> None:
        self.route = route
        self.conditions = conditions
        self.guards = Guarded.compile(route.guarded, f"{path}.guarded")

    def match(self, request: Request) -> dict[str, str] | None:
        return first_match(self.conditions, request)


def compile_condition(entry: Mapping[str, Any], path: str) -> _HeaderCondition:
    """Compile one ``when`` entry of an http route, ``{headers: {name: pattern}}`` (the schema
    allows no other key and only string patterns)."""
    headers = entry.get("headers") or {}
    checks: list[tuple[str, Pattern]] = []
    for name, text in headers.items():
        where = f"{path}.headers.{name}"
        if not isinstance(name, str) or not name:  # YAML keys may be numbers, or empty
            raise ConfigError(where, "a header name must be a non-empty string")
        lowered = name.lower()
        if lowered.startswith(":") and lowered not in PSEUDO_HEADERS:
            raise ConfigError(
                where, f"unknown pseudo-header; use one of {', '.join(PSEUDO_HEADERS)}"
            )
        checks.append((lowered, Pattern.compile(text, where)))
    return _HeaderCondition(checks)


class HttpRoutes:
    """An http server binding's routes, compiled once at start-up."""

    def __init__(self, binding: Binding) -> None:
        compiled: list[_CompiledRoute] = []
        for index, route in enumerate(binding.routes):
            route_path = route.path or f"{binding.path}.routes[{index}]"
            conditions = [
                compile_condition(entry, f"{route_path}.when[{n}]")
                for n, entry in enumerate(route.when)
            ]
            compiled.append(_CompiledRoute(route, conditions, route_path))
        if binding.exit and not any(
            not c.conditions and not c.route.guarded and c.route.exit == binding.exit
            for c in compiled
        ):
            # The plain ``exit`` is the route of last resort.
            fallback = Route(exit=binding.exit, path=f"{binding.path}.exit")
            compiled.append(_CompiledRoute(fallback, [], fallback.path))
        self._routes = compiled

    @property
    def routes(self) -> list[Route]:
        """Every route, in the order they are tried."""
        return [c.route for c in self._routes]

    def candidates(self, request: Request) -> Iterator[RouteMatch]:
        """Every route whose ``when`` matches ``request``, in order, with its parameters."""
        for compiled in self._routes:
            params = compiled.match(request)
            if params is not None:
                yield RouteMatch(compiled.route, params, compiled.guards)

    def match(self, request: Request) -> RouteMatch | None:
        """The first route whose ``when`` matches (guards not considered), or ``None``."""
        return next(self.candidates(request), None)

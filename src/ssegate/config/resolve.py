"""The schema-checked document turned into the :mod:`ssegate.config.model`, and the graph checked.

A stream enters at a ``tcp`` server and travels inward binding by binding, each handing it to
the one its route (or plain ``exit``) names. :data:`EXITS` says which binding may hand a stream
to which; everything else here checks that the names in the document point at things that
exist: exits at bindings, ``vault`` at vaults, ``guarded`` and ``authorization`` at guards,
model ``catalog`` entries at catalogs, and that no chain of exits comes back on itself. Role
names in ``guarded`` may only use the expressions ``${method}`` and ``${path}``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from ssegate.config.errors import ConfigError, ConfigErrors
from ssegate.config.guarded import GuardedRoles
from ssegate.config.model import Binding, Component, Config, Route
from ssegate.config.validate import sorted_unique, yaml_path

Role = tuple[str, str]
"""A binding's ``(type, kind)``."""

EXITS: dict[Role, tuple[Role, ...]] = {
    ("tcp", "server"): (("tls", "server"), ("http", "server")),
    ("tls", "server"): (("http", "server"),),
    ("http", "server"): (("sse", "server"), ("http-filesystem", "proxy"), ("asyncapi", "server")),
    ("http-filesystem", "proxy"): (("filesystem", "server"),),
    ("sse", "server"): (("sse", "client"), ("sse-kafka", "proxy")),
    ("sse", "client"): (("http", "client"),),
    ("http", "client"): (("tcp", "client"), ("tls", "client")),
    ("tls", "client"): (("tcp", "client"),),
    ("sse-kafka", "proxy"): (("kafka", "cache_client"),),
    ("kafka", "cache_client"): (("kafka", "cache_server"),),
    ("kafka", "cache_server"): (("kafka", "client"),),
    ("kafka", "client"): (("tcp", "client"), ("tls", "client")),
    ("asyncapi", "server"): (("asyncapi", "proxy"), ("asyncapi", "client")),
    ("asyncapi", "proxy"): (("asyncapi", "client"),),
    ("asyncapi", "client"): (("tcp", "client"), ("tls", "client")),
}
"""Which bindings each binding may exit to. Absent or empty: it ends the chain itself."""

NEEDS_EXIT: frozenset[Role] = frozenset(EXITS) - {
    ("asyncapi", "server"),
    ("asyncapi", "proxy"),
    ("asyncapi", "client"),
}
"""Bindings that cannot work without an exit (``asyncapi`` ones build their own chain)."""

_GUARDED_EXPRESSION = re.compile(r"\$\{guarded\[['\"]([^'\"]+)['\"]\]")


def resolve(document: Mapping[str, Any], *, source: str, base_dir: str) -> Config:
    """Build the :class:`Config` from a schema-valid document. Raises :class:`ConfigErrors`."""
    telemetry = dict(document.get("telemetry") or {})
    config = Config(
        name=document["name"],
        bindings={
            name: _binding(name, raw) for name, raw in (document.get("bindings") or {}).items()
        },
        guards=_components("guards", document.get("guards")),
        vaults=_components("vaults", document.get("vaults")),
        catalogs=_components("catalogs", document.get("catalogs")),
        exporters=_components("telemetry.exporters", telemetry.get("exporters")),
        telemetry=telemetry,
        source=source,
        base_dir=base_dir,
    )
    errors = list(check_graph(config))
    if errors:
        raise ConfigErrors(sorted_unique(errors))
    return config


def _binding(name: str, raw: Mapping[str, Any]) -> Binding:
    path = f"bindings.{name}"
    routes = [
        Route(
            exit=route.get("exit"),
            when=list(route.get("when") or []),
            with_=route.get("with"),
            guarded=dict(route.get("guarded") or {}),
            path=f"{path}.routes[{index}]",
        )
        for index, route in enumerate(raw.get("routes") or [])
    ]
    return Binding(
        name=name,
        type=raw["type"],
        kind=raw["kind"],
        options=dict(raw.get("options") or {}),
        routes=routes,
        exit=raw.get("exit"),
        vault=raw.get("vault"),
        telemetry=dict(raw.get("telemetry") or {}),
    )


def _components(section: str, raw: Mapping[str, Any] | None) -> dict[str, Component]:
    return {
        name: Component(
            name=name,
            type=value["type"],
            options=dict(value.get("options") or {}),
            path=f"{section}.{name}",
        )
        for name, value in (raw or {}).items()
    }


_SAID_WITH_A_VOWEL = frozenset({"http", "http-filesystem", "sse", "sse-kafka", "asyncapi"})


def describe_role(role: Role, *, article: bool = False) -> str:
    """``("http", "server")`` → ``http server``, or ``an http server`` with ``article``."""
    text = f"{role[0]} {role[1]}"
    if not article:
        return text
    return f"an {text}" if role[0] in _SAID_WITH_A_VOWEL else f"a {text}"


def _under(prefix: str, parts: list[str | int]) -> str:
    """``prefix`` followed by the YAML path ``parts``."""
    suffix = yaml_path(parts)
    if not suffix:
        return prefix
    return prefix + suffix if suffix.startswith("[") else f"{prefix}.{suffix}"


def check_graph(config: Config) -> Iterator[ConfigError]:
    """Every problem with the references between the parts of ``config``."""
    for binding in config.bindings.values():
        yield from _check_exits(binding, config)
        yield from _check_references(binding, config)
    yield from _check_cycles(config)


def _exit_entries(binding: Binding) -> Iterator[tuple[str, str]]:
    """``(yaml path, target name)`` for every exit the binding names."""
    for route in binding.routes:
        if route.exit:
            yield f"{route.path}.exit", route.exit
    if binding.exit:
        yield f"{binding.path}.exit", binding.exit


def _check_exits(binding: Binding, config: Config) -> Iterator[ConfigError]:
    role = (binding.type, binding.kind)
    allowed = EXITS.get(role, ())
    entries = list(_exit_entries(binding))
    if not entries and role in NEEDS_EXIT:
        targets = ", ".join(describe_role(r) for r in allowed)
        needs = f"{describe_role(role, article=True)} needs an 'exit' or routes with one"
        message = f"{needs} (to: {targets})"
        yield ConfigError(binding.path, message)
    for path, name in entries:
        target = config.bindings.get(name)
        if target is None:
            yield ConfigError(path, f"binding {name!r} is not defined")
            continue
        target_role = (target.type, target.kind)
        if target_role in allowed:
            continue
        if allowed:
            fits = ", ".join(describe_role(r) for r in allowed)
            message = (
                f"binding {name!r} is {describe_role(target_role, article=True)}, but "
                f"{describe_role(role, article=True)} can only exit to: {fits}"
            )
        else:
            message = f"{describe_role(role, article=True)} ends the chain and takes no exit"
        yield ConfigError(path, message)


def _check_references(binding: Binding, config: Config) -> Iterator[ConfigError]:
    if binding.vault is not None and binding.vault not in config.vaults:
        yield ConfigError(f"{binding.path}.vault", f"vault {binding.vault!r} is not defined")
    if (binding.type, binding.kind) == ("tls", "server") and binding.vault is None:
        yield ConfigError(
            f"{binding.path}.vault",
            "required but missing: a tls server reads its keys from a vault",
        )
    authorization = binding.options.get("authorization") or {}
    for guard in authorization:
        if guard not in config.guards:
            path = f"{binding.path}.options.authorization.{guard}"
            yield ConfigError(path, f"guard {guard!r} is not defined")
    for route in binding.routes:
        for guard in route.guarded:
            if guard not in config.guards:
                yield ConfigError(
                    f"{route.path}.guarded.{guard}", f"guard {guard!r} is not defined"
                )
        try:
            GuardedRoles.compile(route.guarded, f"{route.path}.guarded")
        except ConfigError as error:
            yield error
        for parts, guard in _guarded_expressions(route.with_, ["with"]):
            path = _under(route.path, parts)
            if guard not in config.guards:
                yield ConfigError(path, f"guard {guard!r} is not defined")
    for parts, catalog in _catalog_references(binding.options, ["options"]):
        if catalog not in config.catalogs:
            path = _under(binding.path, parts)
            yield ConfigError(path, f"catalog {catalog!r} is not defined")


def _guarded_expressions(
    value: object, parts: list[str | int]
) -> Iterator[tuple[list[str | int], str]]:
    """``(path, guard)`` for every ``${guarded['guard']...}`` in the strings under ``value``."""
    if isinstance(value, str):
        for match in _GUARDED_EXPRESSION.finditer(value):
            yield parts, match.group(1)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _guarded_expressions(item, [*parts, key])
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _guarded_expressions(item, [*parts, index])


def _catalog_references(
    value: object, parts: list[str | int]
) -> Iterator[tuple[list[str | int], str]]:
    """``(path, catalog)`` for every key of a ``catalog:`` mapping found under ``value``."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key == "catalog" and isinstance(item, Mapping):
                for catalog in item:
                    yield [*parts, key, catalog], catalog
            else:
                yield from _catalog_references(item, [*parts, key])
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _catalog_references(item, [*parts, index])


def _check_cycles(config: Config) -> Iterator[ConfigError]:
    """One error per loop of exits, named from its alphabetically first binding."""
    graph = {
        name: [target for target in binding.exits() if target in config.bindings]
        for name, binding in config.bindings.items()
    }
    reported: set[tuple[str, ...]] = set()
    for cycle in _find_cycles(graph):
        start = cycle.index(min(cycle))
        canonical = tuple(cycle[start:] + cycle[:start])
        if canonical in reported:
            continue
        reported.add(canonical)
        loop = " -> ".join([*canonical, canonical[0]])
        yield ConfigError(f"bindings.{canonical[0]}", f"exits form a cycle: {loop}")


def _find_cycles(graph: Mapping[str, list[str]]) -> Iterator[list[str]]:
    """Cycles met by a depth-first walk from every binding (each at least once)."""
    done: set[str] = set()
    for root in graph:
        if root in done:
            continue
        trail: list[str] = []
        on_trail: set[str] = set()
        stack: list[tuple[str, Iterator[str]]] = [(root, iter(graph[root]))]
        trail.append(root)
        on_trail.add(root)
        while stack:
            node, targets = stack[-1]
            target = next(targets, None)
            if target is None:
                stack.pop()
                trail.pop()
                on_trail.discard(node)
                done.add(node)
            elif target in on_trail:
                yield trail[trail.index(target) :]
            elif target not in done:
                stack.append((target, iter(graph[target])))
                trail.append(target)
                on_trail.add(target)

"""The shape of ``src/ssegate``'s imports: no cycle, and every import points down the layers.

:data:`LAYERS` is the map of docs/architecture.md: each floor names the parts of the package on
it (a part is a top-level package or module of ``ssegate``), the ground floor first. A module
imports modules of its own floor and of the floors below it, never one above; and the parts
:data:`APART` names never import each other, whatever floor they are on.

Every import counts, those made only for type checking included: a cycle of type-only imports
still means two modules that cannot be read, or moved, apart. A module imports another when it
names it (``import a.b``, ``from a.b import c``) or one of its members (``from a import b``,
``b`` a module); the package a module sits in is not counted, as Python imports it whatever the
module says.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("ssegate", "contract", "sse_codec", "native", "cache", "kafka"),
    ("config",),
    ("telemetry", "vaults", "catalogs", "jars", "models", "asyncapi", "host", "quotas"),
    ("engine", "guards", "tools"),
    ("bindings",),
    ("cli", "__main__", "pipeline"),
)
"""The floors, the ground floor first: the joints every layer meets on (the exchange contract,
identities, the ``Guard`` protocol) and the leaves; the config; the cores bindings share; the
engine beside the guards; the bindings; the commands."""

APART: tuple[tuple[str, str], ...] = (
    ("engine", "guards"),
    ("engine", "tools"),
)
"""Parts that never import each other: the engine meets guards only through ``contract``."""


def _modules() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for path in sorted((SRC / "ssegate").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _imported(name: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            yield module
            yield from (f"{module}.{alias.name}" for alias in node.names)


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {
        name: {d for d in _imported(name, path, modules) if d in modules and d != name}
        for name, path in modules.items()
    }


def part(module: str) -> str:
    """The part of the package ``module`` belongs to: ``ssegate.engine.runtime`` → ``engine``."""
    return module.split(".")[1] if "." in module else module


def floor(module: str) -> int:
    """The floor of ``module``'s part in :data:`LAYERS`; -1 when no floor names it."""
    return next((n for n, parts in enumerate(LAYERS) if part(module) in parts), -1)


def upward(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Every import of a module on a higher floor, and between parts kept :data:`APART`."""
    apart = {*APART, *((b, a) for a, b in APART)}
    return sorted(
        (module, imported)
        for module, imports in graph.items()
        for imported in imports
        if floor(imported) > floor(module) or (part(module), part(imported)) in apart
    )


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_cycles_are_found_by_the_checker_itself() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_graph_of_ssegate_has_no_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 100  # the whole package was read
    assert cycles(graph) == []


def test_the_engine_imports_no_binding() -> None:
    upward = sorted(
        (module, imported)
        for module, imports in import_graph().items()
        if module.startswith("ssegate.engine")
        for imported in imports
        if imported.startswith("ssegate.bindings")
    )
    assert upward == []


def test_the_layer_check_finds_an_import_up_and_one_between_parts_kept_apart() -> None:
    graph = {
        "ssegate.config.loader": {"ssegate.asyncapi.expand", "ssegate.contract.exchange"},
        "ssegate.engine.runtime": {"ssegate.guards.relay", "ssegate.config.model"},
        "ssegate.guards.jwt_guard": {"ssegate.config.model"},
    }
    assert upward(graph) == [
        ("ssegate.config.loader", "ssegate.asyncapi.expand"),
        ("ssegate.engine.runtime", "ssegate.guards.relay"),
    ]


def test_every_part_of_ssegate_is_on_one_floor() -> None:
    parts = {part(module) for module in import_graph()}
    declared = [name for floor_parts in LAYERS for name in floor_parts]
    assert sorted(name for name in parts if floor(name) < 0) == []
    assert sorted(name for name in declared if name not in parts) == []
    assert len(declared) == len(set(declared))


def test_every_import_points_down_the_layers() -> None:
    assert upward(import_graph()) == []


def test_the_engine_and_the_guards_meet_only_on_the_ground_floor() -> None:
    between = sorted(
        (module, imported)
        for module, imports in import_graph().items()
        for imported in imports
        if {part(module), part(imported)} == {"engine", "guards"}
    )
    assert between == []


def test_the_config_imports_neither_guards_nor_asyncapi() -> None:
    reached = sorted(
        (module, imported)
        for module, imports in import_graph().items()
        if part(module) == "config"
        for imported in imports
        if part(imported) in ("guards", "asyncapi")
    )
    assert reached == []

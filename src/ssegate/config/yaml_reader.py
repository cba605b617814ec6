"""YAML text to plain values, with a bound on what reading a config may cost.

The loader is PyYAML's safe loader with three additions, each checked while the YAML is being
composed into nodes, before any value is built:

- a key that appears twice in one mapping is refused (naming both lines);
- nesting is at most :attr:`ConfigLimits.max_depth` collections deep (default 64), so neither
  the composer nor anything that walks the document later can run out of stack;
- aliases are counted by what they expand to. Every node composed gets its expanded size (itself
  plus everything under it, each alias inside counted at its full size) and its height; an alias
  adds its target's expanded size to a running total, which may not pass
  :attr:`ConfigLimits.max_alias_nodes` (default 100,000), and its target's height to the depth
  where it is used, which may not pass ``max_depth``. A "billion laughs" document is refused at
  the alias that crosses the bound, after work proportional to the text, never to the expansion.
  An alias to a collection that contains it (``&a [*a]``) would expand forever and is refused.

The size of the text itself (:attr:`ConfigLimits.max_bytes`, default 4 MiB) is checked by the
caller before parsing, with :func:`check_size`. Every refusal is a :class:`ConfigError` that
names the limit it exceeded; the ones met while composing give the line and column.

Every YAML file ssegate reads goes through here, not only ``zilla.yaml``: :func:`read_text`
reads a file no further than the size limit, and :func:`load_yaml_text` checks a text's size
and parses it, each error a :class:`ConfigError` naming the file (pipeline files, AsyncAPI
documents, whether from a file or a catalog).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NoReturn, cast

import yaml

from ssegate.config.errors import ConfigError


@dataclass(frozen=True, slots=True)
class ConfigLimits:
    """What a config may cost to read."""

    max_bytes: int = 4 * 1024 * 1024
    """The largest config text, in bytes of UTF-8."""
    max_depth: int = 64
    """How many collections deep values may nest, aliases expanded."""
    max_alias_nodes: int = 100_000
    """How many values all aliases together may add when expanded."""


DEFAULT_LIMITS = ConfigLimits()
_SCALAR = (1, 0)
"""A scalar's expanded size and height."""


def check_size(
    size: int, source: str, limits: ConfigLimits = DEFAULT_LIMITS, what: str = "config"
) -> None:
    """Raise :class:`ConfigError` when a ``what`` of ``size`` bytes is over the size limit."""
    if size > limits.max_bytes:
        raise ConfigError(
            source,
            f"the {what} is larger than the size limit of {limits.max_bytes} bytes"
            f" ({_mib(limits.max_bytes)})",
        )


def read_text(path: str, what: str = "config file", limits: ConfigLimits = DEFAULT_LIMITS) -> str:
    """The text of the UTF-8 file at ``path`` (a ``what``), read no further than the size limit.

    Raises :class:`ConfigError` naming ``path`` when the file cannot be read, is larger than
    the limit, or is not UTF-8.
    """
    try:
        with open(path, "rb") as file:
            raw = file.read(limits.max_bytes + 1)
    except OSError as exc:
        raise ConfigError(path, f"cannot read the {what}: {exc.strerror or exc}") from None
    check_size(len(raw), path, limits, what)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(path, f"the {what} is not UTF-8 text (byte {exc.start})") from None


def load_yaml_text(
    text: str, source: str, what: str, limits: ConfigLimits = DEFAULT_LIMITS
) -> object:
    """The YAML ``text`` of a ``what`` named ``source``, as plain values.

    Raises :class:`ConfigError` naming ``source``: over the size limit, or a syntax error or a
    limit met while parsing (``line L, column C: <problem>``).
    """
    check_size(len(text.encode("utf-8", "surrogatepass")), source, limits, what)
    try:
        return parse_yaml(text, limits)
    except yaml.MarkedYAMLError as exc:
        where, problem = located(exc)
        raise ConfigError(source, f"{where}: {problem}" if where else problem) from None
    except yaml.YAMLError as exc:
        raise ConfigError(source, f"the {what} is not valid YAML: {exc}") from None


def located(exc: yaml.MarkedYAMLError) -> tuple[str, str]:
    """Where a YAML error is (``line L, column C``; empty when unknown) and what it is."""
    mark = exc.problem_mark or exc.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = exc.problem or "invalid YAML"
    if exc.context and exc.context_mark and exc.context_mark is not mark:
        problem = f"{problem} ({exc.context} at line {exc.context_mark.line + 1})"
    return where, problem


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):g} MiB"


def parse_yaml(text: str, limits: ConfigLimits = DEFAULT_LIMITS) -> object:
    """The YAML document in ``text`` as plain values; raises ``yaml.YAMLError``.

    A document over a limit raises ``yaml.MarkedYAMLError`` (located) saying which.
    """
    loader = _BoundedLoader(text, limits)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


class _BoundedLoader(yaml.SafeLoader):
    """The safe loader, refusing duplicate keys, deep nesting and runaway aliases."""

    def __init__(self, text: str, limits: ConfigLimits) -> None:
        super().__init__(text)
        self._limits = limits
        self._depth = 0
        self._alias_nodes = 0
        self._measured: dict[yaml.Node, tuple[int, int]] = {}
        """Collection → (expanded size, height), for every collection composed so far."""

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event: yaml.NodeEvent = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent):
            target = self.anchors.get(event.anchor)
            if target is not None:  # else the composer reports the undefined alias
                self._expand_alias(event, target)
            return super().compose_node(parent, index)
        collection = isinstance(event, yaml.CollectionStartEvent)
        if collection:
            self._depth += 1
            if self._depth > self._limits.max_depth:
                self._refuse(event, self._too_deep())
        try:
            node = super().compose_node(parent, index)
        finally:
            if collection:
                self._depth -= 1
        if node is not None:
            self._measure(node)
        return node

    def _measure(self, node: yaml.Node) -> None:
        if isinstance(node, yaml.ScalarNode):
            return  # (1, 0): not stored, scalars are most of a document
        children: list[yaml.Node] = (
            [child for pair in node.value for child in pair]
            if isinstance(node, yaml.MappingNode)
            else list(node.value)
        )
        measures = [self._measured.get(child, _SCALAR) for child in children]
        size = 1 + sum(size for size, _ in measures)
        height = 1 + max((height for _, height in measures), default=0)
        self._measured[node] = (size, height)

    def _expand_alias(self, event: yaml.NodeEvent, target: yaml.Node) -> None:
        measured = _SCALAR if isinstance(target, yaml.ScalarNode) else self._measured.get(target)
        if measured is None:
            self._refuse(event, f"alias *{event.anchor} refers to a collection that contains it")
        size, height = measured
        if self._depth + height > self._limits.max_depth:
            self._refuse(event, f"{self._too_deep()}, through alias *{event.anchor}")
        self._alias_nodes += size
        if self._alias_nodes > self._limits.max_alias_nodes:
            self._refuse(
                event,
                f"aliases expand to more than {self._limits.max_alias_nodes} values"
                f" (the alias expansion limit), passed at alias *{event.anchor}",
            )

    def _too_deep(self) -> str:
        return f"values nest more than {self._limits.max_depth} levels deep (the nesting limit)"

    def _refuse(self, event: yaml.Event, problem: str) -> NoReturn:
        mark = cast("yaml.Mark | None", event.start_mark)
        raise yaml.composer.ComposerError(None, None, problem, mark)

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

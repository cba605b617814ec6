"""``with.filters`` of an sse-kafka route: which Kafka messages one subscriber gets.

A route's ``filters`` is a list of entries. A message passes when **any** entry matches (OR);
an entry matches when **all** of its conditions do (AND): ``key`` equals the message key, and
for every ``headers`` name some header of that name carries the value. Values are static text
or route templates (``${params.x}``, ``${guarded['g'].identity}``), compared as UTF-8 bytes.

:class:`FilterTemplate` is compiled once per route from the config; :meth:`FilterTemplate.render`
turns it into a :class:`MessageFilter` per request (templates filled in, values encoded once);
:meth:`MessageFilter.matches` runs per message and only compares bytes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ssegate.config.errors import ConfigError
from ssegate.engine.templates import Template
from ssegate.kafka.topics import Interest, KafkaMessage


@dataclass(frozen=True, slots=True)
class FilterEntry:
    """One rendered entry: every condition must hold."""

    key: bytes | None
    """``None``: the key is not looked at."""
    headers: tuple[tuple[str, bytes], ...]

    def matches(self, message: KafkaMessage) -> bool:
        if self.key is not None and message.key != self.key:
            return False
        return all((name, value) in message.headers for name, value in self.headers)


@dataclass(frozen=True, slots=True)
class MessageFilter:
    """The rendered filters of one subscription."""

    entries: tuple[FilterEntry, ...]

    def matches(self, message: KafkaMessage) -> bool:
        return any(entry.matches(message) for entry in self.entries)

    def interest(self) -> Interest | None:
        """The keys and headers the Kafka cache indexes this filter by: per entry its key, or
        its first header when it names no key (every message the filter accepts carries one).
        ``None`` when an entry names neither (``headers: {}``): it accepts every message."""
        keys: set[bytes] = set()
        headers: set[tuple[str, bytes]] = set()
        for entry in self.entries:
            if entry.key is not None:
                keys.add(entry.key)
            elif entry.headers:
                headers.add(entry.headers[0])
            else:
                return None
        return Interest(frozenset(keys), frozenset(headers))


@dataclass(frozen=True, slots=True)
class _EntryTemplate:
    key: Template | None
    headers: tuple[tuple[str, Template], ...]


class FilterTemplate:
    """A route's ``with.filters``, compiled once."""

    __slots__ = ("_entries", "_static")

    def __init__(self, entries: tuple[_EntryTemplate, ...]) -> None:
        self._entries = entries
        self._static: MessageFilter | None = None
        if all(template.is_static for template in self._templates()):
            self._static = self.render({}, None)

    @classmethod
    def compile(cls, filters: list[Mapping[str, Any]] | None, path: str) -> FilterTemplate | None:
        """Compile ``with.filters`` found at YAML path ``path``; ``None`` when there are none.
        The schema gives each entry a string ``key``, string ``headers`` or both, nothing else."""
        if not filters:
            return None
        entries: list[_EntryTemplate] = []
        for index, entry in enumerate(filters):
            where = f"{path}[{index}]"
            key = entry.get("key")
            headers = entry.get("headers") or {}
            compiled_headers: list[tuple[str, Template]] = []
            for name, value in headers.items():
                if not isinstance(name, str) or not name:  # YAML keys may be numbers, or empty
                    raise ConfigError(
                        f"{where}.headers", "a header name must be a non-empty string"
                    )
                compiled_headers.append((name, Template.compile(value, f"{where}.headers.{name}")))
            entries.append(
                _EntryTemplate(
                    None if key is None else Template.compile(key, f"{where}.key"),
                    tuple(compiled_headers),
                )
            )
        return cls(tuple(entries))

    def _templates(self) -> Iterator[Template]:
        for entry in self._entries:
            if entry.key is not None:
                yield entry.key
            for _, template in entry.headers:
                yield template

    @property
    def param_names(self) -> frozenset[str]:
        return frozenset(name for t in self._templates() for name in t.param_names)

    @property
    def guard_names(self) -> frozenset[str]:
        return frozenset(name for t in self._templates() for name in t.guard_names)

    def render(self, params: Mapping[str, str], guarded: Mapping[str, Any] | None) -> MessageFilter:
        """The filter for one request; raises ``MissingTemplateValue`` when a value is absent."""
        if self._static is not None:
            return self._static
        return MessageFilter(
            tuple(
                FilterEntry(
                    None if e.key is None else e.key.render(params, guarded).encode(),
                    tuple((n, t.render(params, guarded).encode()) for n, t in e.headers),
                )
                for e in self._entries
            )
        )

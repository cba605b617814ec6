"""The contract by which an ``sse-kafka`` stream asks the ``kafka`` cache where a time falls.

A stream opened with ``?since=<time>`` starts each partition at its first record whose
timestamp is at or after that time, as the broker's time index says. What the sse-kafka proxy
exits to (the ``kafka`` cache_client) answers that through :class:`TopicTimes`; the answer per
partition is a :class:`PartitionTime`, from which the proxy works out a start offset per
partition (:func:`ssegate.bindings.sse_kafka.since.start_of`) and subscribes through
:class:`~ssegate.kafka.topics.TopicSource` exactly as it does for a last event id.

The lookup is a broker round trip: it is awaited on the event loop and runs elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class PartitionTime:
    """Where a time falls in one partition."""

    found: int
    """The first offset whose timestamp is at or after the time; ``-1``: no record is."""
    earliest: int
    """The partition's log start (its oldest offset after retention), ``-1`` when not asked:
    it is asked when :attr:`found` is a record past offset 0."""
    end: int
    """The partition's end (the next offset produced), ``-1`` when not asked: it is asked
    when :attr:`found` is ``-1``."""


class TimeLookupFailed(Exception):
    """The broker did not answer the time lookup (down, or not within the lookup's timeout);
    ``reason`` says which. The proxy answers 503 with it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@runtime_checkable
class TopicTimes(Protocol):
    async def offsets_for_time(self, topic: str, time_ms: int) -> Mapping[int, PartitionTime]:
        """Where ``time_ms`` (milliseconds since the epoch) falls in every partition of
        ``topic``. Raises ``UnknownTopic`` for a topic the broker does not know and
        :class:`TimeLookupFailed` when the broker does not answer."""

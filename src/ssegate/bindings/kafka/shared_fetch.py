"""The fetch thread's shared fetch: which partitions it reads, from where, and the cluster.

The first consumer of :mod:`~.fetcher`: every partition of every started topic, once, from the
offset the topic started at (the log start for ``historical``, the end for ``live``), for as
long as the process runs; positioned by ``assign`` with explicit offsets, never committing.
:class:`SharedFetch` owns it and what the metadata says:

- **Topic starts** (:class:`~.fetch_events.StartTopic`): the topic's partitions, their
  watermarks and whether it is compacted (``cleanup.policy``, read with the admin API), then
  one ``incremental_assign``; a topic that does not exist yet waits for a later refresh
  (:class:`~.fetch_events.TopicMissing`).
- **Metadata refreshes** (every ``metadata_interval``): the cluster's topic names
  (:class:`~.fetch_events.TopicsListed`), waiting topics that now exist, partitions added to
  started topics (fetched from their start, :class:`~.fetch_events.PartitionsAdded`), and the
  brokers and partition leaders (:mod:`~.cluster_view`, :class:`~.fetch_events.ClusterChanged`).
  A refresh that fails, or a start that does, reports the broker unavailable; one that answers
  reports it back.
- **Log ends**: the high watermark of every partition read, asked at a topic's start and then
  taken every :data:`LOG_END_INTERVAL` from librdkafka's cache (updated by every fetch answer,
  no request), for the per-partition lag (:mod:`~.partition_lag`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported, untyped
    AdminClient,
    ClusterMetadata,
    ConfigResource,
)

from ssegate.bindings.kafka.cluster_view import ClusterView
from ssegate.bindings.kafka.fetch_events import (
    Event,
    PartitionsAdded,
    StartTopic,
    TopicMissing,
    TopicsListed,
    TopicStarted,
)
from ssegate.bindings.kafka.fetch_records import RecordBatches

REQUEST_TIMEOUT = 5.0
DOWN_PROBE_TIMEOUT = 0.5
LOG_END_INTERVAL = 0.5
"""Seconds between two reads of the log ends librdkafka cached (a lag is read when scraped)."""

LogEndsTable = Mapping[tuple[str, int], int]


class SharedFetch:
    """The shared-fetch consumer, the topics it reads and what metadata says (fetch thread)."""

    def __init__(
        self,
        consumer: Consumer,
        admin_config: Callable[[], dict[str, Any]],
        records: RecordBatches,
        emit: Callable[[Event], None],
        set_available: Callable[[bool, str], None],
        on_log_ends: Callable[[LogEndsTable], None] | None = None,
    ) -> None:
        """``emit`` hands an event to the loop; ``set_available`` reports whether the cluster
        answers; ``on_log_ends`` gets every new table of log ends (never changed after)."""
        self.consumer = consumer
        self._admin_config = admin_config
        self._records = records
        self._emit = emit
        self._set_available = set_available
        self._on_log_ends = on_log_ends
        self._topics: dict[str, StartTopic] = {}
        self._waiting: dict[str, StartTopic] = {}
        self._partitions: dict[str, int] = {}
        self._view: ClusterView | None = None
        self._admin: AdminClient | None = None
        self._ends: dict[tuple[str, int], int] = {}
        self._ends_at = 0.0
        self.assignments = 0
        """Partitions the shared fetch was assigned, over the thread's life."""

    def started(self, topic: str) -> bool:
        return topic in self._topics

    def wants(self, command: StartTopic) -> bool:
        """Whether ``command`` names a topic neither started nor waiting."""
        return command.topic not in self._topics and command.topic not in self._waiting

    def start_topic(self, command: StartTopic) -> None:
        self._waiting[command.topic] = command
        self._start(command)

    def _start(self, command: StartTopic) -> None:
        topic = command.topic
        try:
            metadata = self.consumer.list_topics(topic, timeout=REQUEST_TIMEOUT)
            found = metadata.topics.get(topic)
            if found is None or found.error is not None or not found.partitions:
                reason = found.error.str() if found is not None and found.error else "no partitions"
                self._emit(TopicMissing(topic, reason))
                return  # tried again with the next metadata refresh
            compacted = self._is_compacted(topic)
            marks = {p: self._watermarks(topic, p) for p in sorted(found.partitions)}
        except KafkaException as exc:
            self._set_available(False, str(exc.args[0]) if exc.args else "unavailable")
            return
        starts = self._assign(topic, marks, live=command.default == "live")
        ends = {p: high for p, (_, high) in marks.items()}
        self._topics[topic] = command
        self._waiting.pop(topic, None)
        self._partitions[topic] = len(starts)
        self._emit(TopicStarted(topic, starts, ends, compacted))
        self._publish_ends({(topic, p): end for p, end in ends.items()})

    def _assign(self, topic: str, marks: dict[int, tuple[int, int]], live: bool) -> dict[int, int]:
        """Fetch the partitions of ``marks`` (partition → watermarks) from their log start, or
        from their end if ``live``; answers where each is fetched from."""
        starts = {p: high if live else low for p, (low, high) in marks.items()}
        self.consumer.incremental_assign([
            TopicPartition(topic, p, self._records.reading_from(False, topic, p, o, marks[p][0]))
            for p, o in starts.items()
        ])  # fmt: skip
        self.assignments += len(starts)
        return starts

    def _watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        low, high = self.consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=REQUEST_TIMEOUT
        )
        return int(low), int(high)

    def _is_compacted(self, topic: str) -> bool:
        if self._admin is None:
            self._admin = AdminClient(self._admin_config())
        resource = ConfigResource("topic", topic)
        futures = self._admin.describe_configs([resource], request_timeout=REQUEST_TIMEOUT)
        configs = futures[resource].result(timeout=REQUEST_TIMEOUT)
        policy = configs.get("cleanup.policy")
        return policy is not None and "compact" in str(policy.value)

    def refresh_metadata(self, available: bool) -> None:
        """Ask the cluster what it holds now (``available``: whether it answered last)."""
        timeout = REQUEST_TIMEOUT if available else DOWN_PROBE_TIMEOUT
        try:
            metadata = self.consumer.list_topics(timeout=timeout)
        except KafkaException as exc:
            self._set_available(False, str(exc.args[0]) if exc.args else "unavailable")
            return
        if not metadata.brokers:
            return
        self._set_available(True, "")
        self._emit(TopicsListed(frozenset(metadata.topics)))
        self._watch_cluster(metadata)
        for command in list(self._waiting.values()):
            if command.topic in metadata.topics:
                self._start(command)
        for topic, known in list(self._partitions.items()):
            found = metadata.topics.get(topic)
            if found is None or len(found.partitions) <= known:
                continue
            added = [p for p in sorted(found.partitions) if p >= known]
            try:
                marks = {p: self._watermarks(topic, p) for p in added}
            except KafkaException:
                continue
            starts = self._assign(topic, marks, live=False)
            self._partitions[topic] = known + len(added)
            self._emit(PartitionsAdded(topic, starts))
            self._publish_ends({(topic, p): high for p, (_, high) in marks.items()})

    def _watch_cluster(self, metadata: ClusterMetadata) -> None:
        leaders = {
            (topic, partition): int(state.leader)
            for topic in self._partitions
            if (found := metadata.topics.get(topic)) is not None
            for partition, state in found.partitions.items()
        }
        brokers = {node: f"{b.host}:{b.port}" for node, b in metadata.brokers.items()}
        view = ClusterView(brokers, leaders)
        change = view.changes_since(self._view)
        self._view = view
        if change is not None:
            self._emit(change)

    def read_log_ends(self, now: float) -> None:
        """Every :data:`LOG_END_INTERVAL`: take the ends librdkafka cached from its fetch
        answers (no request); report them when any moved."""
        if self._on_log_ends is None or now < self._ends_at or not self._ends:
            return
        self._ends_at = now + LOG_END_INTERVAL
        moved: dict[tuple[str, int], int] = {}
        for key, known in self._ends.items():
            try:
                marks = self.consumer.get_watermark_offsets(TopicPartition(*key), cached=True)
            except KafkaException:
                continue
            if marks is not None and int(marks[1]) >= 0 and int(marks[1]) != known:
                moved[key] = int(marks[1])  # librdkafka answers a negative offset until it knows
        if moved:
            self._publish_ends(moved)

    def _publish_ends(self, ends: Mapping[tuple[str, int], int]) -> None:
        self._ends.update(ends)
        if self._on_log_ends is not None:
            self._on_log_ends(dict(self._ends))

    def close(self) -> None:
        self.consumer.close()


def next_refresh(available: bool, interval: float) -> float:
    """When the next metadata refresh is due: ``interval`` on, or soon while the cluster is
    away (the refresh is the probe that finds it back)."""
    return time.monotonic() + (interval if available else DOWN_PROBE_TIMEOUT)

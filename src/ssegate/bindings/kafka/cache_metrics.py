"""The metrics and log lines of a ``kafka`` cache_server's batches, subscribers and cache.

:class:`CacheMetrics` is the bookkeeping half of :class:`~.cache_server.KafkaCacheServer`: each
feed reports a batch it took in (:meth:`CacheMetrics.fetched`, its
:attr:`~.topic_feed.FeedHooks.on_fetched`) and a change in its subscribers
(:meth:`CacheMetrics.subscribers`, its :attr:`~.topic_feed.FeedHooks.subscribers_changed`);
the server's event dispatch (:mod:`~.feed_dispatch`) reports evictions of idle caches and the
fan-out lag of a live batch. Nothing here changes what a feed holds or delivers: it counts, under
the binding's name and label ``topic``, and logs what a batch passed over (repeats at debug,
invalid messages at warning, and each transform field with nothing to extract once per topic).
"""

from __future__ import annotations

import logging
import time

from ssegate.bindings.kafka.fetch_events import Fetched
from ssegate.telemetry import log
from ssegate.telemetry.metrics import LAG_BUCKETS, Metrics

REPEATS_LOGGED = 20
"""The offsets of at most this many of a batch's repeats go in its log line."""


class CacheMetrics:
    """Counts what the feeds of cache server ``name`` took in, held and let go."""

    def __init__(self, name: str, metrics: Metrics) -> None:
        self.name = name
        self.metrics = metrics
        self._warned_unextracted: set[tuple[str, str]] = set()

    def fetched(self, topic: str, batch: Fetched, evicted: int, grown: int) -> None:
        metrics = self.metrics
        received = len(batch.messages) + len(batch.invalid) + len(batch.repeats)
        metrics.inc("ssegate.kafka.messages.received", self.name, received, topic=topic)
        if batch.repeats:
            repeats = batch.repeats
            metrics.inc("ssegate.kafka.repeats_skipped", self.name, len(repeats), topic=topic)
            log.event("kafka.repeats_skipped", binding=self.name, level=logging.DEBUG,
                      topic=topic, partition=batch.partition, count=len(repeats),
                      offsets=[r.offset for r in repeats[:REPEATS_LOGGED]],
                      earlier=[r.earlier for r in repeats[:REPEATS_LOGGED]],
                      first_id=repeats[0].record_id.decode(errors="replace"))  # fmt: skip
        self.evicted(topic, evicted, -grown)
        for unextracted in batch.unextracted:
            field = str(unextracted.field)
            metrics.inc("ssegate.kafka.transforms.unextracted", self.name, topic=topic, field=field)
            if (topic, field) not in self._warned_unextracted:
                self._warned_unextracted.add((topic, field))
                log.warning(
                    "kafka.transform_unextracted",
                    binding=self.name,
                    message=f"Nothing to extract from {field} on topic {topic}, partition"
                    f" {batch.partition}, offset {unextracted.offset}; later ones are counted",
                )
        for offset, reason in batch.invalid:
            metrics.inc("ssegate.kafka.invalid_messages", self.name, topic=topic)
            log.warning(
                "kafka.invalid_message",
                binding=self.name,
                message=f"Skipping invalid message on topic {topic}, partition"
                f" {batch.partition}, offset {offset}",
                reason=reason,
            )

    def subscribers(self, topic: str, delta: int) -> None:
        self.metrics.gauge("ssegate.kafka.subscribers", self.name, float(delta), topic=topic)

    def evicted(self, topic: str, evicted: int, freed: int) -> None:
        """The caches of ``topic`` let ``evicted`` messages go and shrank by ``freed`` bytes
        (net of what they took in; negative when they grew)."""
        if evicted:
            self.metrics.inc("ssegate.kafka.cache.evictions", self.name, evicted, topic=topic)
        if freed:
            self.metrics.gauge("ssegate.kafka.cache.bytes", self.name, -freed, topic=topic)

    def fanout_lag(self, batch: Fetched) -> None:
        """A live batch (with messages) has been handed to every live subscriber."""
        stamp_ms = batch.messages[0].timestamp_ms
        if stamp_ms > 0:  # librdkafka gives -1 where the record has no timestamp
            lag = max(0.0, time.time() - stamp_ms / 1000)
            self.metrics.observe(
                "ssegate.kafka.fanout.lag", lag, self.name, buckets=LAG_BUCKETS, topic=batch.topic
            )

"""The loop side of a ``kafka`` cache_server's fetch: each event handed over, applied to its feed.

The fetch thread (:mod:`~.fetcher`) reports what it read and saw as :mod:`~.fetch_events`; the
hand-over (:mod:`~.handover`) brings them to the loop in slices. :meth:`FeedDispatch.apply` takes
one slice, in order, on the loop, and is the only place those events reach the topic feeds
(:mod:`~.topic_feed`) of :class:`~.cache_server.KafkaCacheServer`:

- a batch (:class:`~.fetch_events.Fetched`) goes to its topic's feed, traced when delivery
  traces are on and counted in the fan-out lag when live; :meth:`FeedDispatch.apply` returns the
  loop time those hand-overs took, which the server paces the fetch with (:mod:`~.fanout_pace`);
- a topic started, partitions added, a catch-up reset or at its end go to that topic's feed
  (the catch-up events to its :class:`~.feed_catch_up.FeedCatchUp`), counted and logged; a
  follower starts the feed of a topic only the leader asked for;
- the brokers' status goes to every feed (kept, so a feed started later begins with it); a
  change in the cluster (brokers left or joined, leaders moved) is only logged and counted;
- the cluster's topic list and missing topics go to the :class:`~.topic_lookup.TopicLookup`;
  each listing also lets every feed evict what its bounds no longer hold.

Every event also updates the per-partition lag (:mod:`~.partition_lag`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from ssegate.bindings.kafka.cache_metrics import CacheMetrics
from ssegate.bindings.kafka.fetch_events import (
    BrokerStatus,
    CatchUpAtEnd,
    CatchUpReset,
    ClusterChanged,
    Event,
    Fetched,
    PartitionsAdded,
    TopicMissing,
    TopicsListed,
    TopicStarted,
)
from ssegate.bindings.kafka.partition_lag import PartitionLag
from ssegate.bindings.kafka.topic_feed import TopicFeed
from ssegate.bindings.kafka.topic_lookup import TopicLookup
from ssegate.telemetry import log
from ssegate.telemetry.metrics import Metrics
from ssegate.telemetry.traces import DELIVERY


class FeedDispatch:
    """Applies the fetch events of cache server ``name`` to its ``feeds``.

    ``feeds`` is the server's own map of topic to feed, which this reads and adds to only
    through ``new_feed`` (a follower's topic); ``shared_role`` (``leader``, ``follower`` or
    ``None``) is logged by the first slice, when the exporters run.
    """

    def __init__(
        self,
        name: str,
        servers: tuple[str, ...],
        metrics: Metrics,
        *,
        feeds: dict[str, TopicFeed],
        new_feed: Callable[[str], TopicFeed],
        lag: PartitionLag,
        counts: CacheMetrics,
        lookup: TopicLookup,
        shared_role: str | None,
    ) -> None:
        self.name = name
        self.servers = servers
        self.metrics = metrics
        self._feeds = feeds
        self._new_feed = new_feed
        self._lag = lag
        self._counts = counts
        self._lookup = lookup
        self._shared_role = shared_role
        self.available = True
        """Whether a broker answers, as the fetch last said; a new feed starts with it."""
        self.reason = ""
        self._brokers = 0
        self.metrics.gauge("ssegate.kafka.broker.available", name, 1.0)

    def apply(self, events: list[Event], joined: int) -> float:
        """Apply ``events`` in order; the seconds spent handing batches to the feeds."""
        if self._shared_role is not None:
            log.event("kafka.shared_fetch", binding=self.name, role=self._shared_role,
                      pid=os.getpid())  # fmt: skip
            self._shared_role = None
        if joined:
            self.metrics.inc("ssegate.kafka.fetch.batches_joined", self.name, joined)
        handed_over = 0.0
        for event in events:
            self._lag.observe(event)
            if isinstance(event, Fetched):
                feed = self._feeds.get(event.topic)
                if feed is not None:
                    started = time.perf_counter()
                    trace = (
                        DELIVERY.begin(self.name, event)
                        if DELIVERY.enabled and not event.catch_up
                        else None
                    )
                    feed.on_fetched(event)
                    if trace is not None:
                        DELIVERY.finish(trace)
                    handed_over += time.perf_counter() - started
                    if not event.catch_up and event.messages:
                        self._counts.fanout_lag(event)
            elif isinstance(event, TopicStarted):
                self._on_started(event)
            elif isinstance(event, PartitionsAdded):
                self.metrics.inc(
                    "ssegate.kafka.fetch.assignments", self.name, len(event.starts),
                    topic=event.topic,
                )  # fmt: skip
                log.event("kafka.partitions_added", binding=self.name, topic=event.topic,
                          partitions=sorted(event.starts))  # fmt: skip
                self._feeds[event.topic].on_partitions_added(event.starts)
            elif isinstance(event, CatchUpReset):
                self.metrics.inc("ssegate.kafka.resets", self.name, topic=event.topic)
                log.warning("kafka.offset_reset", binding=self.name, topic=event.topic,
                            partition=event.partition, requested=event.requested,
                            earliest=event.earliest)  # fmt: skip
                self._feeds[event.topic].catch_up.on_reset(event)
            elif isinstance(event, CatchUpAtEnd):
                self._feeds[event.topic].catch_up.on_at_end(event)
            elif isinstance(event, BrokerStatus):
                self._on_status(event)
            elif isinstance(event, ClusterChanged):
                self._on_cluster(event)
            elif isinstance(event, TopicsListed):
                self._lookup.listed(event.names)
                self._evict_idle()
            elif isinstance(event, TopicMissing):
                self._lookup.missing(event)
        return handed_over

    def _on_started(self, event: TopicStarted) -> None:
        self.metrics.inc(
            "ssegate.kafka.fetch.assignments", self.name, len(event.starts), topic=event.topic
        )
        log.event("kafka.topic_started", binding=self.name, topic=event.topic,
                  partitions=len(event.starts), compacted=event.compacted)  # fmt: skip
        self._lookup.started(event.topic)
        feed = self._feeds.get(event.topic)
        if feed is None:  # a follower: another worker's stream asked for it
            feed = self._new_feed(event.topic)
        feed.on_started(event.starts, event.ends, event.compacted)

    def _on_status(self, event: BrokerStatus) -> None:
        self.available = event.available
        self.reason = event.reason
        self.metrics.gauge("ssegate.kafka.broker.available", self.name,
                           1.0 if event.available else -1.0)  # fmt: skip
        if event.available:
            log.event("kafka.broker_up", binding=self.name, servers=",".join(self.servers))
        else:
            log.warning("kafka.broker_down", binding=self.name, reason=event.reason,
                        servers=",".join(self.servers))  # fmt: skip
        for feed in self._feeds.values():
            feed.on_status(event.available, event.reason)

    def _on_cluster(self, event: ClusterChanged) -> None:
        """Brokers that left or joined the cluster, partitions whose leader moved."""
        metrics, name = self.metrics, self.name
        metrics.gauge("ssegate.kafka.brokers", name, float(len(event.brokers) - self._brokers))
        self._brokers = len(event.brokers)
        brokers = ",".join(f"{node}@{address}" for node, address in sorted(event.brokers.items()))
        if event.first:
            metrics.inc("ssegate.kafka.brokers.left", name, 0.0)
            metrics.inc("ssegate.kafka.brokers.joined", name, 0.0)
            log.event("kafka.cluster", binding=name, brokers=brokers)
        for node, address in sorted(event.left.items()):
            metrics.inc("ssegate.kafka.brokers.left", name)
            log.warning("kafka.broker_left", binding=name, broker=node, address=address,
                        brokers=brokers)  # fmt: skip
        for node, address in sorted(event.joined.items()):
            metrics.inc("ssegate.kafka.brokers.joined", name)
            log.event("kafka.broker_joined", binding=name, broker=node, address=address,
                      brokers=brokers)  # fmt: skip
        for move in event.moves:
            metrics.inc("ssegate.kafka.leader_changes", name, topic=move.topic)
            log.event("kafka.leader_changed", binding=name, topic=move.topic,
                      partition=move.partition, leader=move.leader,
                      previous=move.previous)  # fmt: skip

    def _evict_idle(self) -> None:
        for topic, feed in self._feeds.items():
            evicted, freed = feed.evict()
            self._counts.evicted(topic, evicted, freed)

"""The ``kafka`` cache_server binding: the process's one reader of each Kafka topic partition.

Design:

- **One fetch per topic partition per process.** A :class:`KafkaCacheServer` owns one
  :class:`~.fetcher.FetchThread`: librdkafka's blocking consumer runs there, never on the event
  loop. A topic is started the first time it is subscribed to (or at start for
  ``options.bootstrap``): every partition is ``assign``\\ ed once, at explicit offsets (the log
  start for ``defaultOffset: historical``, the default, or the end for ``live``), with no
  consumer group commits. Partitions added later are found by a metadata refresh every few
  seconds and fetched from their start.
- **Hand-over.** Each pass of the thread (one ``consume`` call per consumer) adds its
  per-partition batches to one inbox (:mod:`~.handover`); the loop drains it in slices of
  bounded time, joining the batches of each partition that arrived while it was busy, and the
  thread waits while the inbox is over its bound (``ssegate.kafka.fetch.stalls`` and the log
  line ``kafka.fanout_behind``). On the loop a batch is appended to the partition's cache and
  handed to the live subscribers (:mod:`~.topic_feed`): the same list to each one without
  filters, and to each filtered one only the messages its interest may want, or nothing.
  The loop time that takes sets how long the thread gathers records before its next batch
  (:mod:`~.fanout_pace`): a costly fan-out gets fewer, larger batches, a cheap one each record
  at once.
- **One fetch per host.** Under ``start --workers N``, worker 0's fetch thread reads for every
  worker and the others read its events instead (:mod:`~.host_fetch`); each keeps its own
  cache, catch-up reader and fan-out. A follower starts the feed of every topic the leader
  starts, asked for there or not, so every worker caches the same records from the same offsets.
- **Cache.** Per partition, bounded by ``cache.max-bytes`` (per topic, split evenly over its
  partitions) and ``cache.max-age``; compacted topics (``cleanup.policy`` read with the admin
  API) keep the latest value per key (:mod:`~.partition_cache`).
- **Late subscribers** replay from the cache, in chunks, then go live. A subscriber asking for
  an offset older than the cache holds is served by the thread's single **catch-up reader** (a
  second consumer, assigned only partitions someone needs history for, from the oldest offset
  needed) until it reaches the cache, then replays and goes live. An offset below the log start
  is reported with ``on_reset`` and served from the log start.
- **Broker outages** leave every subscription open: subscribers get ``on_status(False, reason)``,
  librdkafka reconnects with backoff, the consumers keep their positions, and delivery resumes
  where it stopped after ``on_status(True)``. In a cluster, a node that goes away is only
  logged and counted (``kafka.broker_left``, ``kafka.leader_changed``): the fetch follows each
  partition it led to the new leader, from where it was, and subscribers see a pause.
- **Invalid messages** (a topic's ``key``/``value`` model refuses them; the check runs in the
  thread) are skipped for every subscriber, logged, counted, and progress moves past them.
- **Repeats** (a record carrying the ``ssegate-id`` of a record at most ``cache.repeat-horizon``
  offsets before it in its partition: an at-least-once producer wrote it again, :mod:`~.repeats`)
  are passed over in the thread the same way: never cached, delivered, replayed or matched by a
  filter, while their offsets stay where they are (ids that resume after them stay valid). Each
  reader starting at an offset first reads the horizon before it, handing nothing over, to know
  the first copies there; so every reader in every process skips the same records, and a client
  gets each record once, wherever it resumes. Counted by the shared fetch
  (``ssegate.kafka.repeats_skipped``) with a debug line ``kafka.repeats_skipped`` per batch.

Metrics (label ``topic``): ``ssegate.kafka.messages.received``, ``ssegate.kafka.cache.bytes``,
``ssegate.kafka.cache.evictions``, ``ssegate.kafka.subscribers``,
``ssegate.kafka.invalid_messages``, ``ssegate.kafka.repeats_skipped``,
``ssegate.kafka.transforms.unextracted`` (and label ``field``: :mod:`~.transforms`),
``ssegate.kafka.fetch.assignments``, the lag and backlog gauges of :mod:`~.partition_lag`,
``ssegate.kafka.resets``, ``ssegate.kafka.fetch.stalls``, ``ssegate.kafka.leader_changes``;
``ssegate.kafka.broker.available`` (1 or 0: whether any broker answers);
``ssegate.kafka.brokers`` (the brokers the cluster's latest metadata lists) with the counters
``ssegate.kafka.brokers.left`` and ``ssegate.kafka.brokers.joined``;
``ssegate.kafka.fetch.batches_joined`` (batches that waited for a busy loop and went out with
an earlier one); the histogram ``ssegate.kafka.fanout.lag``: seconds from a live batch's oldest
record timestamp (the producer's clock, or the broker's with ``LogAppendTime``) until the batch
has been handed to every live subscriber.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from ssegate.bindings.kafka import partition_lag
from ssegate.bindings.kafka.cache_metrics import CacheMetrics
from ssegate.bindings.kafka.client import KafkaClient
from ssegate.bindings.kafka.fanout_pace import FanoutPace
from ssegate.bindings.kafka.feed_dispatch import FeedDispatch
from ssegate.bindings.kafka.fetch_events import CatchUp, EndCatchUp, Event, StartTopic
from ssegate.bindings.kafka.fetcher import FetchThread
from ssegate.bindings.kafka.handover import Handover
from ssegate.bindings.kafka.host_fetch import LeaderEnd, SharedFetchEnd, end_of
from ssegate.bindings.kafka.message_check import MessageCheck, all_of
from ssegate.bindings.kafka.partition_cache import DEFAULT_MAX_AGE, DEFAULT_MAX_BYTES
from ssegate.bindings.kafka.repeats import DEFAULT_HORIZON
from ssegate.bindings.kafka.topic_feed import FeedHooks, TopicFeed
from ssegate.bindings.kafka.topic_lookup import TopicLookup
from ssegate.bindings.kafka.transforms import TopicTransform, build_transforms
from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding
from ssegate.engine.context import BuildContext, ExitKind
from ssegate.kafka.topics import DefaultOffset, TopicListener, TopicSubscription, UnknownTopic
from ssegate.models.topics import build_topic_checks
from ssegate.telemetry import log
from ssegate.telemetry.metrics import Metrics


@dataclass(frozen=True, slots=True)
class CacheBounds:
    max_bytes: int = DEFAULT_MAX_BYTES
    """Per topic, split evenly over its partitions."""
    max_age: float = DEFAULT_MAX_AGE
    repeat_horizon: int = DEFAULT_HORIZON
    """Offsets back within which a record's id makes a later one with it a repeat; 0: none."""


class KafkaCacheServer:
    """Implements :class:`~ssegate.kafka.topics.TopicSource` for the whole process.

    Its parts: the fetch thread and the hand-over that brings its events to the loop, the
    dispatch of those events to the feeds (:mod:`~.feed_dispatch`), the lookup of topics asked
    for (:mod:`~.topic_lookup`) and the metrics of the feeds (:mod:`~.cache_metrics`).
    """

    def __init__(
        self,
        name: str,
        client: KafkaClient,
        *,
        bootstrap: Iterable[str] = (),
        default_offsets: Mapping[str, DefaultOffset] | None = None,
        checks: Mapping[str, MessageCheck] | None = None,
        transforms: Mapping[str, TopicTransform] | None = None,
        bounds: CacheBounds | None = None,
        metrics: Metrics | None = None,
        metadata_interval: float = 5.0,
        shared: SharedFetchEnd | None = None,
    ) -> None:
        self.name = name
        self.client = client
        self.bootstrap = tuple(bootstrap)
        self.default_offsets = dict(default_offsets or {})
        self.bounds = bounds or CacheBounds()
        self.metrics = metrics or Metrics()
        self._checks: dict[str, MessageCheck] = dict(checks or {})
        self._pace = FanoutPace()
        self._handover = Handover(
            self._schedule_from_thread, self._on_events, on_stall=self._on_stall
        )
        self._lag = partition_lag.register(self.metrics, name, lambda: self._handover.pending)
        self._fetcher = FetchThread(
            client, self._handover.put, self._checks, transforms=transforms,
            metadata_interval=metadata_interval, on_log_ends=self._lag.set_ends,
            repeat_horizon=self.bounds.repeat_horizon, name=f"kafka-fetch-{name}", shared=shared,
        )  # fmt: skip
        shared_role = (
            None if shared is None else "leader" if isinstance(shared, LeaderEnd) else "follower"
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._feeds: dict[str, TopicFeed] = {}
        self._counts = CacheMetrics(name, self.metrics)
        self._lookup = TopicLookup(name, self._fetcher.topic_exists)
        self._events = FeedDispatch(
            name, client.servers, self.metrics, feeds=self._feeds, new_feed=self._new_feed,
            lag=self._lag, counts=self._counts, lookup=self._lookup, shared_role=shared_role,
        )  # fmt: skip
        self._closed = False

    # -- set-up --------------------------------------------------------------------------------

    def add_check(self, topic: str, check: MessageCheck) -> None:
        """Also refuse messages of ``topic`` that ``check`` refuses (a cache client's models)."""
        existing = self._checks.get(topic)
        self._checks[topic] = all_of([existing, check]) if existing else check  # type: ignore[assignment]

    def start(self) -> None:
        """Start the fetch thread and the ``bootstrap`` topics; needs the running loop."""
        if self._loop is not None or self._closed:
            return
        self._loop = asyncio.get_running_loop()
        self._fetcher.start()
        for topic in self.bootstrap:
            self._feed(topic)

    # -- TopicSource ---------------------------------------------------------------------------

    def subscribe(
        self,
        topic: str,
        start: Mapping[int, int],
        listener: TopicListener,
        *,
        default: DefaultOffset | None = None,
    ) -> TopicSubscription:
        self.start()
        feed = self._feeds.get(topic)
        if feed is None:
            if not self._lookup.exists(topic):
                raise UnknownTopic(topic)
            feed = self._feed(topic)
        if default is None:
            default = self.default_offsets.get(topic, "historical")
        subscription = feed.subscribe(listener, start, default)
        self._counts.subscribers(topic, 1)
        return subscription

    def holds(self, topic: str, start: Mapping[int, int]) -> bool:
        feed = self._feeds.get(topic)
        return feed is not None and feed.holds(start)

    def _feed(self, topic: str) -> TopicFeed:
        feed = self._feeds.get(topic)
        if feed is None:
            feed = self._new_feed(topic)
            default = self.default_offsets.get(topic, "historical")
            self._fetcher.send(StartTopic(topic, default))
        return feed

    def _new_feed(self, topic: str) -> TopicFeed:
        """A feed for ``topic``, waiting for the fetch to start it."""
        hooks = FeedHooks(
            schedule=self._schedule,
            catch_up=self._catch_up,
            end_catch_up=self._end_catch_up,
            now=time.monotonic,
            on_fetched=self._counts.fetched,
            subscribers_changed=self._counts.subscribers,
        )
        feed = TopicFeed(topic, hooks, max_bytes=self.bounds.max_bytes, max_age=self.bounds.max_age)
        if not self._events.available:
            feed.on_status(False, self._events.reason)
        self._feeds[topic] = feed
        return feed

    # -- hooks the feeds call ------------------------------------------------------------------

    def _schedule(self, step: Callable[[], object]) -> None:
        assert self._loop is not None
        self._loop.call_soon(step)

    def _catch_up(self, topic: str, partition: int, offset: int, ticket: int) -> None:
        self.metrics.inc("ssegate.kafka.catch_up.requests", self.name, topic=topic)
        self._fetcher.send(CatchUp(topic, partition, offset, ticket))

    def _end_catch_up(self, topic: str, partition: int) -> None:
        self._fetcher.send(EndCatchUp(topic, partition))

    # -- events from the fetch thread ----------------------------------------------------------

    def _schedule_from_thread(self, callback: Callable[[], None]) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed as the thread finished
                loop.call_soon_threadsafe(callback)

    def _on_stall(self, stalls: int) -> None:
        """The fetch thread waited for the loop: fan-out is behind what Kafka brings."""
        self.metrics.inc("ssegate.kafka.fetch.stalls", self.name, stalls)
        log.warning(
            "kafka.fanout_behind",
            binding=self.name,
            pending=self._handover.pending,
            stalls=stalls,
            message="the fetch waits for the fan-out to catch up; Kafka holds the rest",
        )

    def _on_events(self, events: list[Event], joined: int) -> None:
        if self._closed:
            return
        handed_over = self._events.apply(events, joined)
        if handed_over:
            self._fetcher.linger = self._pace.observe(handed_over)

    # -- stop ----------------------------------------------------------------------------------

    @property
    def fetch_assignments(self) -> int:
        """Partitions the shared fetch was assigned since start (one per topic partition)."""
        return self._fetcher.assignments

    async def close(self) -> None:
        """Stop the fetch thread and close its consumers."""
        if self._closed:
            return
        self._closed = True
        self._handover.close()
        if self._fetcher.started:
            await asyncio.get_running_loop().run_in_executor(None, self._fetcher.stop)


KAFKA_CLIENT: ExitKind[KafkaClient] = ExitKind(KafkaClient, "a kafka client")


def build(binding: Binding, ctx: BuildContext) -> KafkaCacheServer:
    options = binding.options
    where = f"{binding.path}.options"
    if binding.exit is None:
        raise ConfigError(f"{binding.path}.exit", "a kafka cache_server exits to a kafka client")
    client = ctx.exit(binding.exit, KAFKA_CLIENT, f"{binding.path}.exit")
    topics = list(options.get("topics") or ())
    defaults: dict[str, DefaultOffset] = {
        str(topic["name"]): "live" if topic.get("defaultOffset") == "live" else "historical"
        for topic in topics
    }
    cache = options.get("cache") or {}  # the schema bounds both
    max_bytes = int(cache.get("max-bytes", DEFAULT_MAX_BYTES))
    max_age = float(cache.get("max-age", DEFAULT_MAX_AGE))
    repeat_horizon = int(cache.get("repeat-horizon", DEFAULT_HORIZON))
    server = KafkaCacheServer(
        binding.name,
        client,
        bootstrap=[str(t) for t in options.get("bootstrap") or ()],
        default_offsets=defaults,
        checks=build_topic_checks(topics, f"{where}.topics", ctx.catalogs),
        transforms=build_transforms(topics, f"{where}.topics", ctx.catalogs),
        bounds=CacheBounds(max_bytes, max_age, repeat_horizon),
        metrics=ctx.metrics,
        shared=end_of(ctx.worker_link(binding.name)),
    )
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return server  # started by the first subscribe, on the loop
    server.start()
    return server

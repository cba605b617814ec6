"""The thread edge between librdkafka's blocking consumer and the event loop.

One :class:`FetchThread` per cache server runs two consumers, both positioned by ``assign``
with explicit offsets and never committing:

- the *shared fetch* (:mod:`~.shared_fetch`): every partition of every started topic, once,
  from the offset the topic started at, for as long as the process runs;
- the *catch-up reader* (:mod:`~.catch_up`): only partitions some subscriber needs from before
  what the cache holds, from the oldest such offset, until the loop says it is no longer needed.

Each pass of the thread applies the loop's commands, refreshes metadata when due (new
partitions, the cluster's topic names, broker availability), takes the log ends librdkafka
cached (:mod:`~.partition_lag`), then calls ``consume`` on each consumer and groups the records
by partition into :class:`~.fetch_events.Fetched` values (:mod:`~.fetch_records`: the topic's
:data:`~.message_check.MessageCheck` and transforms run here, off the loop, and repeats are
left out). Everything one pass produced is handed over in one ``deliver`` call
(:class:`~.handover.Handover`).

The broker going away is seen through librdkafka's ``error_cb`` (all brokers down) or a failing
metadata request; it is back when a metadata request answers again. librdkafka reconnects by
itself and the consumers keep their positions, so nothing is lost or repeated. In a cluster,
one node going away is seen in the metadata: the brokers it lists and the partitions' leaders
(:mod:`~.cluster_view`), reported as :class:`~.fetch_events.ClusterChanged`; librdkafka
follows a partition to its new leader by itself, from the position it had.

Under ``start --workers N`` the workers share one shared fetch (:mod:`~.host_fetch`): the
thread of worker 0 also writes what its shared fetch produced to the others (and the log ends
it heard, :class:`~.fetch_events.LogEnds`) and starts the topics they ask for; the thread of
every other worker has no shared-fetch consumer and reads the leader's events instead, keeping
its own catch-up reader.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message
from confluent_kafka.admin import AdminClient

from ssegate.bindings.kafka.catch_up import CatchUpReader
from ssegate.bindings.kafka.client import KafkaClient
from ssegate.bindings.kafka.fetch_events import (
    BrokerStatus,
    CatchUp,
    Command,
    EndCatchUp,
    Event,
    LogEnds,
    StartTopic,
)
from ssegate.bindings.kafka.fetch_records import RecordBatches
from ssegate.bindings.kafka.host_fetch import FollowerEnd, LeaderEnd, SharedFetchEnd
from ssegate.bindings.kafka.message_check import MessageCheck
from ssegate.bindings.kafka.shared_fetch import LogEndsTable, SharedFetch, next_refresh
from ssegate.bindings.kafka.transforms import TopicTransform
from ssegate.telemetry.traces import DELIVERY

BATCH = 5000
IDLE_WAIT = 0.1
BUSY_WAIT = 0.01


def gather_for(linger: float, last_batch: float, now: float) -> float:
    """How long a batch whose first record came ``now`` gathers more: until ``linger`` has
    passed since the previous batch closed (at ``last_batch``), and not at all once it has.

    Batches of a reader are then at least ``linger`` apart, which bounds a fan-out's writes
    per second by ``subscribers / linger`` whatever the message rate; and a topic whose
    records come less often than that hands each one over as it comes, without waiting a
    linger that would gather nothing.
    """
    return min(linger, max(0.0, last_batch + linger - now))


class FetchThread:
    """The one thread that talks to librdkafka for a cache server."""

    def __init__(
        self,
        client: KafkaClient,
        deliver: Callable[[list[Event]], None],
        checks: Mapping[str, MessageCheck],
        *,
        transforms: Mapping[str, TopicTransform] | None = None,
        metadata_interval: float = 5.0,
        repeat_horizon: int = 0,
        name: str = "kafka-fetch",
        shared: SharedFetchEnd | None = None,
        on_log_ends: Callable[[LogEndsTable], None] | None = None,
    ) -> None:
        """``on_log_ends`` (called on this thread) gets each new table of the log ends the
        shared fetch heard of, its own or, in a follower, the leader's."""
        self._client = client
        self._leader = shared if isinstance(shared, LeaderEnd) else None
        """Set in worker 0 of several: the followers this thread's shared fetch is for."""
        self._follower = shared if isinstance(shared, FollowerEnd) else None
        """Set in the other workers: where the shared fetch's events come from."""
        self._deliver = deliver
        self.linger = 0.0
        """Seconds at least between two batches of one reader, gathering records meanwhile
        (set by the cache server, :func:`gather_for`)."""
        self._batch_at: dict[bool, float] = {}
        """When each reader (shared fetch, catch-up) last closed a batch."""
        self.records = RecordBatches(checks, transforms, repeat_horizon)
        self._metadata_interval = metadata_interval
        self._on_log_ends = on_log_ends
        self._commands: queue.SimpleQueue[Command] = queue.SimpleQueue()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._pending: list[Event] = []
        self._available = True
        self._fetch: SharedFetch | None = None
        self._catch_up = CatchUpReader(
            lambda: self._consumer_config("catch-up"),
            self.records,
            self._pending.append,
            lambda reason: self._set_available(False, reason),
            self._commands.put,
        )
        self._lookup: AdminClient | None = None

    @property
    def assignments(self) -> int:
        """Partitions the shared fetch was assigned, over the thread's life."""
        return self._fetch.assignments if self._fetch is not None else 0

    # -- called from the loop ----------------------------------------------------------------

    def start(self) -> None:
        if self._follower is None:
            self._fetch = SharedFetch(
                Consumer(self._consumer_config("fetch")),
                self._client.admin_config,
                self.records,
                self._pending.append,
                self._set_available,
                self._heard_log_ends if self._on_log_ends or self._leader else None,
            )
        self._lookup = AdminClient(self._client.admin_config())
        self._thread.start()

    @property
    def started(self) -> bool:
        return self._thread.is_alive()

    def send(self, command: Command) -> None:
        self._commands.put(command)

    def topic_exists(self, topic: str, timeout: float = 1.0) -> bool | None:
        """Ask the cluster whether ``topic`` exists: ``None`` when it cannot be asked.

        This blocks the caller (the loop) for a metadata round trip; it has its own handle,
        because a consumer busy in ``consume`` on the thread does not answer other threads."""
        if self._lookup is None:
            return None
        try:
            # all topics: naming one in the request lets a broker auto-create it
            metadata = self._lookup.list_topics(timeout=timeout)
        except KafkaException:
            return None
        found = metadata.topics.get(topic)
        return found is not None and found.error is None and bool(found.partitions)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread and close the consumers (blocks up to ``timeout``)."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    # -- the thread --------------------------------------------------------------------------

    def _consumer_config(self, purpose: str) -> dict[str, Any]:
        config = self._client.consumer_config(purpose)
        config["error_cb"] = self._on_error
        return config

    def _run(self) -> None:
        next_metadata = 0.0
        try:
            while not self._stopping.is_set():
                self._apply_commands()
                busy = self._catch_up.busy
                fetch = self._fetch
                if fetch is None:
                    assert self._follower is not None
                    self._read_leader(self._follower, BUSY_WAIT if busy else IDLE_WAIT)
                else:
                    now = time.monotonic()
                    if now >= next_metadata:
                        fetch.refresh_metadata(self._available)
                        next_metadata = next_refresh(self._available, self._metadata_interval)
                    fetch.read_log_ends(now)
                    self._read(fetch.consumer, BUSY_WAIT if busy else IDLE_WAIT, catch_up=False)
                consumer = self._catch_up.consumer
                if busy and consumer is not None:
                    self._read(consumer, BUSY_WAIT, catch_up=True)
                self._flush()
        finally:
            if self._fetch is not None:
                self._fetch.close()
            self._catch_up.close()
            for end in (self._leader, self._follower):
                if end is not None:
                    end.close()

    def _flush(self) -> None:
        if self._pending:
            events = self._pending[:]
            self._pending.clear()  # the same list: the readers append to it
            if self._leader is not None:
                self._leader.broadcast(events)
            self._deliver(events)

    def _heard_log_ends(self, ends: LogEndsTable) -> None:
        """The shared fetch heard new log ends: for this process's lag, and the followers'."""
        if self._on_log_ends is not None:
            self._on_log_ends(ends)
        if self._leader is not None:
            self._leader.broadcast([LogEnds(ends)])

    def _read_leader(self, follower: FollowerEnd, timeout: float) -> None:
        """A follower's pass: the leader's events, as if this thread had fetched them."""
        if not follower.connected:
            time.sleep(timeout)
            return
        for event in follower.read(timeout):
            if isinstance(event, LogEnds):
                if self._on_log_ends is not None:
                    self._on_log_ends(event.ends)  # now, not behind the loop's hand-over
                continue
            if isinstance(event, BrokerStatus):
                self._available = event.available
            self._pending.append(event)

    def _on_error(self, error: KafkaError) -> None:
        if self._follower is not None:
            return  # whether the cluster answers is the shared fetch's (the leader's) to say
        if error.code() == KafkaError._ALL_BROKERS_DOWN:
            self._set_available(False, error.str())

    def _set_available(self, available: bool, reason: str = "") -> None:
        if available != self._available:
            self._available = available
            self._pending.append(BrokerStatus(available, reason))

    def _apply_commands(self) -> None:
        fetch = self._fetch
        if self._leader is not None and fetch is not None:
            for asked in self._leader.commands():
                if fetch.wants(asked):
                    fetch.start_topic(asked)
        while True:
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                return
            if isinstance(command, StartTopic):
                if self._follower is not None:
                    self._follower.ask(command)  # the leader starts it for every worker
                elif fetch is not None and not fetch.started(command.topic):
                    fetch.start_topic(command)
            elif isinstance(command, CatchUp):
                self._catch_up.start(command)
            elif isinstance(command, EndCatchUp):
                self._catch_up.end(command)

    def _read(self, consumer: Consumer, timeout: float, *, catch_up: bool) -> None:
        # librdkafka's batch consume waits for a full batch or the timeout: at low rates that
        # is the whole timeout of added latency. So wait for the first record, then gather
        # until ``linger`` has passed since the previous batch (:func:`gather_for`): a large
        # fan-out's writes stay few (one write per subscriber per batch), and a record that
        # comes less often than that is handed over at once.
        records = consumer.consume(num_messages=1, timeout=timeout)
        if not records:
            return
        gather = gather_for(self.linger, self._batch_at.get(catch_up, -math.inf), time.monotonic())
        records.extend(consumer.consume(num_messages=BATCH - 1, timeout=gather))
        self._batch_at[catch_up] = time.monotonic()
        fetched_ns = time.time_ns() if DELIVERY.enabled else 0
        groups: dict[tuple[str, int], list[Message]] = {}
        for record in records:
            error = record.error()
            if error is not None:
                self._on_record_error(record, error, catch_up)
                continue
            key = (record.topic() or "", record.partition() or 0)
            group = groups.get(key)
            if group is None:
                groups[key] = [record]
            else:
                group.append(record)
        if groups:
            self._set_available(True)
        for key, group in groups.items():
            ticket = 0
            if catch_up:
                ticket = self._catch_up.ticket(key)
                self._catch_up.read_to(key, (group[-1].offset() or 0) + 1)
            fetched = self.records.batch(key[0], key[1], group, catch_up, ticket, fetched_ns)
            if fetched is not None:
                self._pending.append(fetched)

    def _on_record_error(self, record: Message, error: KafkaError, catch_up: bool) -> None:
        if error.code() != KafkaError._PARTITION_EOF:
            return  # transient fetch errors: librdkafka retries them
        self._set_available(True)
        if catch_up:
            key = (record.topic() or "", record.partition() or 0)
            self._catch_up.at_end(key, record.offset() or 0)

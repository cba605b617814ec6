"""The thread edge between librdkafka's blocking consumer and the event loop.

One :class:`FetchThread` per cache server runs two consumers, both positioned by ``assign``
with explicit offsets and never committing:

- the *shared fetch*: every partition of every started topic, once, from the offset the topic
  started at, for as long as the process runs;
- the *catch-up reader*: only partitions some subscriber needs from before what the cache
  holds, from the oldest such offset, until the loop says it is no longer needed.

Each pass of the thread applies the loop's commands, refreshes metadata when due (new
partitions, the cluster's topic names, broker availability), then calls ``consume`` on each
consumer and groups the records by partition into :class:`~.fetch_events.Fetched` values
(running the topic's :data:`~.message_check.MessageCheck` here, off the loop). Everything one
pass produced is handed over in one ``deliver`` call (:class:`~.handover.Handover`).

Repeats (:mod:`~.repeats`) are found here too, per reader and partition, and left out of the
batches like invalid records (``next_offset`` still moves past them). A reader handing a
partition over from offset ``X`` is assigned ``repeat_horizon`` offsets earlier and hands over
nothing before ``X``: it reads those records only for their ids. A record without headers costs
one truth test.

The broker going away is seen through librdkafka's ``error_cb`` (all brokers down) or a failing
metadata request; it is back when a metadata request answers again. librdkafka reconnects by
itself and the consumers keep their positions, so nothing is lost or repeated. In a cluster,
one node going away is seen in the metadata: the brokers it lists and the partitions' leaders
(:mod:`~.cluster_view`), reported as :class:`~.fetch_events.ClusterChanged`; librdkafka
follows a partition to its new leader by itself, from the position it had.

Under ``start --workers N`` the workers share one shared fetch (:mod:`~.host_fetch`): the
thread of worker 0 also writes what its shared fetch produced to the others and starts the
topics they ask for; the thread of every other worker has no shared-fetch consumer and reads
the leader's events instead, keeping its own catch-up reader.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported, untyped
    AdminClient,
    ClusterMetadata,
    ConfigResource,
)

from ssegate.bindings.kafka.client import KafkaClient
from ssegate.bindings.kafka.cluster_view import ClusterView
from ssegate.bindings.kafka.fetch_events import (
    BrokerStatus,
    CatchUp,
    CatchUpAtEnd,
    CatchUpReset,
    Command,
    EndCatchUp,
    Event,
    Fetched,
    PartitionsAdded,
    StartTopic,
    TopicMissing,
    TopicsListed,
    TopicStarted,
)
from ssegate.bindings.kafka.host_fetch import FollowerEnd, LeaderEnd, SharedFetchEnd
from ssegate.bindings.kafka.message_check import MessageCheck
from ssegate.bindings.kafka.repeats import Repeat, RepeatFilter, record_id
from ssegate.bindings.kafka.transforms import TopicTransform, Unextracted
from ssegate.kafka.topics import KafkaMessage

BATCH = 5000
IDLE_WAIT = 0.1
BUSY_WAIT = 0.01
REQUEST_TIMEOUT = 5.0
DOWN_PROBE_TIMEOUT = 0.5


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
    ) -> None:
        self._client = client
        self._leader = shared if isinstance(shared, LeaderEnd) else None
        """Set in worker 0 of several: the followers this thread's shared fetch is for."""
        self._follower = shared if isinstance(shared, FollowerEnd) else None
        """Set in the other workers: where the shared fetch's events come from."""
        self._repeat_horizon = repeat_horizon
        """Offsets back within which an id makes a record a repeat (:mod:`~.repeats`); 0: no
        record is a repeat."""
        self._repeats: dict[bool, dict[tuple[str, int], RepeatFilter]] = {False: {}, True: {}}
        """Per reader (catch-up or not), the repeat filter of each partition it reads."""
        self._deliver = deliver
        self.linger = 0.0
        """Seconds at least between two batches of one reader, gathering records meanwhile
        (set by the cache server, :func:`gather_for`)."""
        self._batch_at: dict[bool, float] = {}
        """When each reader (shared fetch, catch-up) last closed a batch."""
        self._checks = checks
        self._transforms = dict(transforms or {})
        """Per topic, the key and headers its records are given (:mod:`~.transforms`)."""
        self._metadata_interval = metadata_interval
        self._commands: queue.SimpleQueue[Command] = queue.SimpleQueue()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._pending: list[Event] = []
        self._available = True
        self._down_reason = ""
        self._topics: dict[str, StartTopic] = {}
        self._waiting: dict[str, StartTopic] = {}
        self._partitions: dict[str, int] = {}
        self._view: ClusterView | None = None
        self._catch_up_next: dict[tuple[str, int], int] = {}
        self._catch_up_ticket: dict[tuple[str, int], int] = {}
        self._fetch: Consumer | None = None
        self._catch_up: Consumer | None = None
        self._admin: AdminClient | None = None
        self._lookup: AdminClient | None = None
        self.assignments = 0
        """Partitions the shared fetch was assigned, over the thread's life."""

    # -- called from the loop ----------------------------------------------------------------

    def start(self) -> None:
        if self._follower is None:
            self._fetch = Consumer(self._consumer_config("fetch"))
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
                busy = bool(self._catch_up_next)
                if self._follower is not None:
                    self._read_leader(self._follower, BUSY_WAIT if busy else IDLE_WAIT)
                else:
                    assert self._fetch is not None
                    now = time.monotonic()
                    if now >= next_metadata:
                        self._refresh_metadata()
                        interval = (
                            self._metadata_interval if self._available else DOWN_PROBE_TIMEOUT
                        )
                        next_metadata = time.monotonic() + interval
                    self._read(self._fetch, BUSY_WAIT if busy else IDLE_WAIT, catch_up=False)
                if busy and self._catch_up is not None:
                    self._read(self._catch_up, BUSY_WAIT, catch_up=True)
                self._flush()
        finally:
            for consumer in (self._fetch, self._catch_up):
                if consumer is not None:
                    consumer.close()
            for end in (self._leader, self._follower):
                if end is not None:
                    end.close()

    def _flush(self) -> None:
        if self._pending:
            events, self._pending = self._pending, []
            if self._leader is not None:
                self._leader.broadcast(events)
            self._deliver(events)

    def _read_leader(self, follower: FollowerEnd, timeout: float) -> None:
        """A follower's pass: the leader's events, as if this thread had fetched them."""
        if not follower.connected:
            time.sleep(timeout)
            return
        for event in follower.read(timeout):
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
        if self._leader is not None:
            for asked in self._leader.commands():
                if asked.topic not in self._topics and asked.topic not in self._waiting:
                    self._waiting[asked.topic] = asked
                    self._start_topic(asked)
        while True:
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                return
            if isinstance(command, StartTopic):
                if self._follower is not None:
                    self._follower.ask(command)  # the leader starts it for every worker
                elif command.topic not in self._topics:
                    self._waiting[command.topic] = command
                    self._start_topic(command)
            elif isinstance(command, CatchUp):
                self._start_catch_up(command)
            elif isinstance(command, EndCatchUp):
                self._end_catch_up(command)

    def _start_topic(self, command: StartTopic) -> None:
        assert self._fetch is not None
        topic = command.topic
        try:
            metadata = self._fetch.list_topics(topic, timeout=REQUEST_TIMEOUT)
            found = metadata.topics.get(topic)
            if found is None or found.error is not None or not found.partitions:
                reason = found.error.str() if found is not None and found.error else "no partitions"
                self._pending.append(TopicMissing(topic, reason))
                return  # tried again with the next metadata refresh
            compacted = self._is_compacted(topic)
            marks = {p: self._watermarks(topic, p) for p in sorted(found.partitions)}
        except KafkaException as exc:
            self._set_available(False, str(exc.args[0]) if exc.args else "unavailable")
            return
        live = command.default == "live"
        starts = {p: high if live else low for p, (low, high) in marks.items()}
        ends = {p: high for p, (_, high) in marks.items()}
        self._fetch.incremental_assign([
            TopicPartition(topic, p, self._reading_from(False, topic, p, o, marks[p][0]))
            for p, o in starts.items()
        ])  # fmt: skip
        self.assignments += len(starts)
        self._topics[topic] = command
        self._waiting.pop(topic, None)
        self._partitions[topic] = len(starts)
        self._pending.append(TopicStarted(topic, starts, ends, compacted))

    def _watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        assert self._fetch is not None
        low, high = self._fetch.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=REQUEST_TIMEOUT
        )
        return int(low), int(high)

    def _is_compacted(self, topic: str) -> bool:
        if self._admin is None:
            self._admin = AdminClient(self._client.admin_config())
        resource = ConfigResource("topic", topic)
        futures = self._admin.describe_configs([resource], request_timeout=REQUEST_TIMEOUT)
        configs = futures[resource].result(timeout=REQUEST_TIMEOUT)
        policy = configs.get("cleanup.policy")
        return policy is not None and "compact" in str(policy.value)

    def _refresh_metadata(self) -> None:
        assert self._fetch is not None
        timeout = REQUEST_TIMEOUT if self._available else DOWN_PROBE_TIMEOUT
        try:
            metadata = self._fetch.list_topics(timeout=timeout)
        except KafkaException as exc:
            self._set_available(False, str(exc.args[0]) if exc.args else "unavailable")
            return
        if not metadata.brokers:
            return
        self._set_available(True)
        self._pending.append(TopicsListed(frozenset(metadata.topics)))
        self._watch_cluster(metadata)
        for command in list(self._waiting.values()):
            if command.topic in metadata.topics:
                self._start_topic(command)
        for topic, known in list(self._partitions.items()):
            found = metadata.topics.get(topic)
            if found is None or len(found.partitions) <= known:
                continue
            added = [p for p in sorted(found.partitions) if p >= known]
            try:
                starts = {p: self._watermarks(topic, p)[0] for p in added}
            except KafkaException:
                continue
            self._fetch.incremental_assign([
                TopicPartition(topic, p, self._reading_from(False, topic, p, o, o))
                for p, o in starts.items()
            ])  # fmt: skip
            self.assignments += len(starts)
            self._partitions[topic] = known + len(added)
            self._pending.append(PartitionsAdded(topic, starts))

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
            self._pending.append(change)

    def _start_catch_up(self, command: CatchUp) -> None:
        if self._catch_up is None:
            self._catch_up = Consumer(self._consumer_config("catch-up"))
        key = (command.topic, command.partition)
        try:
            low, _high = self._catch_up.get_watermark_offsets(
                TopicPartition(command.topic, command.partition), timeout=REQUEST_TIMEOUT
            )
        except KafkaException as exc:
            self._set_available(False, str(exc.args[0]) if exc.args else "unavailable")
            self._commands.put(command)  # tried again on a later pass
            time.sleep(BUSY_WAIT)
            return
        offset = command.offset
        self._catch_up_ticket[key] = command.ticket
        if offset < low:
            self._pending.append(
                CatchUpReset(command.topic, command.partition, offset, int(low), command.ticket)
            )
            offset = int(low)
        position = self._catch_up_next.get(key)
        if position is not None:
            repeats = self._repeats[True].get(key)
            if max(position, repeats.start if repeats else 0) <= offset:
                return  # already reading (and handing over) from before there
        partition = TopicPartition(command.topic, command.partition)
        if position is not None:
            self._catch_up.incremental_unassign([partition])
        reading_from = self._reading_from(True, command.topic, command.partition, offset, int(low))
        self._catch_up.incremental_assign(
            [TopicPartition(command.topic, command.partition, reading_from)]
        )
        self._catch_up_next[key] = reading_from

    def _reading_from(
        self, catch_up: bool, topic: str, partition: int, start: int, low: int
    ) -> int:
        """Where a reader handing over ``partition`` from ``start`` reads from: ``horizon``
        offsets earlier (not before the log start ``low``), to learn the ids there first."""
        if self._repeat_horizon <= 0:
            return start
        repeats = RepeatFilter(self._repeat_horizon, start)
        self._repeats[catch_up][(topic, partition)] = repeats
        return max(low, repeats.reading_from)

    def _end_catch_up(self, command: EndCatchUp) -> None:
        key = (command.topic, command.partition)
        self._catch_up_ticket.pop(key, None)
        self._repeats[True].pop(key, None)
        if self._catch_up is not None and self._catch_up_next.pop(key, None) is not None:
            self._catch_up.incremental_unassign([TopicPartition(command.topic, command.partition)])

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
        for (topic, partition), group in groups.items():
            fetched = self._fetched(topic, partition, group, catch_up)
            if fetched is not None:
                self._pending.append(fetched)

    def _on_record_error(self, record: Message, error: KafkaError, catch_up: bool) -> None:
        if error.code() != KafkaError._PARTITION_EOF:
            return  # transient fetch errors: librdkafka retries them
        self._set_available(True)
        if catch_up:
            key = (record.topic() or "", record.partition() or 0)
            if key in self._catch_up_next:
                ticket = self._catch_up_ticket.get(key, 0)
                self._pending.append(CatchUpAtEnd(key[0], key[1], record.offset() or 0, ticket))

    def _fetched(
        self, topic: str, partition: int, records: list[Message], catch_up: bool
    ) -> Fetched | None:
        """The records as one batch for the loop, or ``None`` when all of them were read only
        to learn their ids (before the reader's :attr:`~.repeats.RepeatFilter.start`)."""
        check = self._checks.get(topic)
        transform = self._transforms.get(topic)
        unextracted: list[Unextracted] = []
        repeats = self._repeats[catch_up].get((topic, partition))
        start = -1 if repeats is None else repeats.start
        messages: list[KafkaMessage] = []
        invalid: list[tuple[int, str]] = []
        skipped: list[Repeat] = []
        for record in records:
            offset = record.offset() or 0
            headers = _headers(record)
            if headers and repeats is not None and (found := record_id(headers)) is not None:
                earlier = repeats.earlier_copy(offset, found)
                if earlier is not None and offset >= start:
                    skipped.append(Repeat(offset, earlier, found))
                    continue
            if offset < start:
                continue  # read to learn its id: the reader hands over from start
            message = KafkaMessage(
                topic,
                partition,
                offset,
                record.key(),
                record.value(),
                headers,
                record.timestamp()[1],
            )
            reason = check(message) if check is not None else None
            if reason is not None:
                invalid.append((offset, reason))
                continue
            if transform is not None:
                message, missed = transform.apply(message)
                unextracted.extend(missed)
            messages.append(message)
        next_offset = (records[-1].offset() or 0) + 1
        ticket = 0
        if catch_up:
            key = (topic, partition)
            ticket = self._catch_up_ticket.get(key, 0)
            if key in self._catch_up_next:
                self._catch_up_next[key] = next_offset
        if next_offset <= start:
            return None
        return Fetched(
            topic, partition, messages, next_offset, invalid, catch_up, ticket, skipped, unextracted
        )


def _headers(record: Message) -> tuple[tuple[str, bytes], ...]:
    headers = record.headers()
    if not headers:
        return ()
    pairs = headers.items() if isinstance(headers, dict) else headers
    return tuple(
        (name, value if isinstance(value, bytes) else (value or "").encode())
        for name, value in pairs
    )

"""Delivery traces: a sampled Kafka record followed from its fetch to the socket writes.

The metrics say how a topic's records fare on the whole (``ssegate.kafka.fanout.lag``); a
delivery trace says where one record waited. No existing mechanism follows a record: the cache
server hands batches on, the subscribers write bytes, and none of them knows which records a
collector wants to hear about. :data:`DELIVERY`, one per process, is that knowledge, and the
stages report to it through small hooks:

- **fetched**: the fetch thread stamps each pass's batches with the time it closed them
  (``Fetched.fetched``, only while tracing is on);
- **fan-out**: the cache server calls :meth:`DeliveryTraces.begin` as it starts handing a live
  batch to the topic's subscribers and :meth:`DeliveryTraces.finish` once it has;
- **write**: in between, each subscriber or broadcast that writes part of the batch reports the
  write through :meth:`BatchTrace.written`: the streams it reached, those whose client the write
  found not reading (stalled: its source stops writing to it) or dropped (a slow client closed).

Which records are traced is decided per batch, at :meth:`~DeliveryTraces.begin` (rule):

- the ``sampling`` ratio is 0: tracing is off. :attr:`DeliveryTraces.enabled` is ``False`` and
  every hook costs one attribute test per batch (per write in the fan-out);
- a record whose ``traceparent`` header (:mod:`~.traceparent`) has the *sampled* flag is always
  traced: the producer decided;
- any other record is traced with probability ``sampling``. The draw is made per batch: the
  gap to the next winner is drawn from the geometric distribution, so a batch with no winner
  costs one comparison, not one random number per record.

A traced record with a valid ``traceparent`` gets the producer's trace id and the header's span
as its parent; one without (or with a malformed header, which is counted in
``ssegate.traces.traceparent.malformed`` and logged once per topic as
``traces.traceparent_malformed``) starts a trace of its own. Only the live fan-out is traced:
replays and catch-ups read records that were delivered (and perhaps traced) when they came.

A finished :class:`RecordTrace` goes into the bounded :class:`SpanBuffer` of every ``otlp``
exporter that exports traces (:mod:`~.otlp`); a full buffer drops it and counts the drop.
Turning the traces into OTLP spans happens at export time (:mod:`~.otlp_traces`).
"""

from __future__ import annotations

import bisect
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ssegate.kafka.topics import KafkaMessage
from ssegate.telemetry import log
from ssegate.telemetry.export_buffer import ExportBuffer
from ssegate.telemetry.metrics import Metrics
from ssegate.telemetry.traceparent import HEADER, MalformedTraceparent, parse_traceparent

DEFAULT_SAMPLING = 0.01
"""The share of records traced when an exporter exports traces and names no ``sampling``."""
BUFFER_CAPACITY = 2048
"""Traced deliveries an exporter holds for its next export; more are dropped and counted."""
MALFORMED_METRIC = "ssegate.traces.traceparent.malformed"


class FetchedBatch(Protocol):
    """What :meth:`DeliveryTraces.begin` reads of a fetched batch
    (:class:`ssegate.bindings.kafka.fetch_events.Fetched`)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def messages(self) -> Sequence[KafkaMessage]: ...
    @property
    def fetched(self) -> Sequence[tuple[int, int]]:
        """``(first offset, ns since the epoch)`` of each fetch pass the batch joins."""


@dataclass(slots=True, eq=False)
class RecordTrace:
    """One traced record's delivery in one process: where it came from, when each stage began
    and ended (ns since the epoch), and whom it reached."""

    binding: str
    """The cache server that fetched it."""
    message: KafkaMessage | None
    """The record, while its fan-out lasts (to recognise it in a write); ``None`` after."""
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    trace_id: bytes
    parent_id: bytes
    """The producer's span (from ``traceparent``), or ``b""``: the delivery starts a trace."""
    span_id: bytes
    fetched_ns: int
    fanout_ns: int
    batch_messages: int
    done_ns: int = 0
    first_write_ns: int = 0
    last_write_ns: int = 0
    writes: int = 0
    """Writes that carried it: one per subscriber alone, one per broadcast."""
    streams: int = 0
    """Streams whose socket (or its transport's buffer) it reached."""
    stalled: int = 0
    """Streams it reached whose client the write found not reading: it waits in their
    connection, and their source writes them no more until they read again."""
    dropped: int = 0
    """Streams closed as too slow by the write that carried it."""


@dataclass(slots=True, eq=False)
class BatchTrace:
    """The traced records of one batch, while its fan-out lasts."""

    records: list[RecordTrace]

    def written(
        self,
        messages: Sequence[KafkaMessage],
        accepts: Callable[[KafkaMessage], bool] | None,
        reach: tuple[int, int, int],
        started_ns: int,
        ended_ns: int,
    ) -> None:
        """A write of ``messages`` (offsets ascending, one partition) through a filter that
        ``accepts`` them (``None``: every one) reached ``(streams, stalled, dropped)``."""
        if not messages:
            return
        low, high = messages[0].offset, messages[-1].offset
        for record in self.records:
            if not low <= record.offset <= high or record.message is None:
                continue
            at = bisect.bisect_left(messages, record.offset, key=_offset)
            if at >= len(messages) or messages[at] is not record.message:
                continue  # offered a part of the batch without it
            if accepts is not None and not accepts(record.message):
                continue
            if not record.writes:
                record.first_write_ns = started_ns
            record.writes += 1
            record.last_write_ns = ended_ns
            record.streams += reach[0]
            record.stalled += reach[1]
            record.dropped += reach[2]


def _offset(message: KafkaMessage) -> int:
    return message.offset


class SpanBuffer(ExportBuffer[RecordTrace]):
    """The traced deliveries waiting for one exporter's next export."""

    def __init__(self, capacity: int = BUFFER_CAPACITY) -> None:
        super().__init__(capacity)


class RatioDraw:
    """Which records win a draw of probability ``ratio``, a batch at a time: the gap before the
    next winner is geometric, so records between winners cost nothing."""

    def __init__(self, ratio: float, rng: random.Random | None = None) -> None:
        self.ratio = ratio
        self._rng = rng or random.Random()
        self._until = self._gap()
        """Records still to pass before the next winner."""

    def _gap(self) -> int:
        if self.ratio >= 1.0:
            return 0
        if self.ratio <= 0.0:
            return 1 << 62
        return int(math.log(1.0 - self._rng.random()) / math.log(1.0 - self.ratio))

    def winners(self, count: int) -> list[int]:
        """The indexes of the winners among the next ``count`` records."""
        at = self._until
        if at >= count:
            self._until = at - count
            return []
        won = []
        while at < count:
            won.append(at)
            at += 1 + self._gap()
        self._until = at - count
        return won


class DeliveryTraces:
    """The process's delivery tracing: off until an exporter of traces attaches to it."""

    def __init__(self) -> None:
        self.enabled = False
        """Whether any record may be traced: the one test a hook makes while tracing is off."""
        self.current: BatchTrace | None = None
        """The batch whose fan-out is under way, when it has traced records."""
        self._buffers: dict[SpanBuffer, float] = {}
        self._draw = RatioDraw(0.0)
        self._metrics: Metrics | None = None
        self._warned: set[tuple[str, str]] = set()
        self._ids = random.Random()

    @property
    def sampling(self) -> float:
        return self._draw.ratio

    def attach(
        self, sampling: float, metrics: Metrics, capacity: int = BUFFER_CAPACITY
    ) -> SpanBuffer:
        """An exporter of traces starts: traced deliveries go to the buffer returned. Several
        exporters share one sampling, the highest they name."""
        buffer = SpanBuffer(capacity)
        self._buffers[buffer] = sampling
        self._metrics = metrics
        self._retune()
        return buffer

    def detach(self, buffer: SpanBuffer) -> None:
        self._buffers.pop(buffer, None)
        self._retune()

    def _retune(self) -> None:
        ratio = max(self._buffers.values(), default=0.0)
        if ratio != self._draw.ratio:
            self._draw = RatioDraw(ratio)
        self.enabled = ratio > 0.0
        if not self.enabled:
            self.current = None

    def begin(self, binding: str, batch: FetchedBatch) -> BatchTrace | None:
        """The fan-out of live ``batch`` (fetched by cache server ``binding``) starts: its
        traced records (see the module's rule), or ``None`` when it has none."""
        messages = batch.messages
        if not messages:
            return None
        chosen = dict.fromkeys(self._draw.winners(len(messages)), None)
        for index, message in enumerate(messages):
            if message.headers:
                self._consider(binding, index, message, chosen)
        if not chosen:
            return None
        now = time.time_ns()
        records = [
            self._record(binding, messages[index], parent, batch.fetched, now, len(messages))
            for index, parent in sorted(chosen.items())
        ]
        trace = self.current = BatchTrace(records)
        return trace

    def _consider(
        self,
        binding: str,
        index: int,
        message: KafkaMessage,
        chosen: dict[int, tuple[bytes, bytes] | None],
    ) -> None:
        """A record with headers: traced when its ``traceparent`` is sampled; its parent kept
        when it is traced anyway."""
        value = message.header(HEADER)
        if value is None:
            return
        try:
            parent = parse_traceparent(value)
        except MalformedTraceparent as exc:
            self._malformed(binding, message, str(exc))
            return
        if parent.sampled or index in chosen:
            chosen[index] = (parent.trace_id, parent.span_id)

    def _record(
        self,
        binding: str,
        message: KafkaMessage,
        parent: tuple[bytes, bytes] | None,
        fetched: Sequence[tuple[int, int]],
        now: int,
        size: int,
    ) -> RecordTrace:
        trace_id, parent_id = parent if parent is not None else (self._new_id(16), b"")
        return RecordTrace(
            binding, message, message.topic, message.partition, message.offset,
            message.timestamp_ms, trace_id, parent_id, self._new_id(8),
            min(now, fetched_at(fetched, message.offset, now)), now, size,
        )  # fmt: skip

    def _new_id(self, size: int) -> bytes:
        while True:
            found = self._ids.getrandbits(size * 8)
            if found:
                return found.to_bytes(size, "big")

    def _malformed(self, binding: str, message: KafkaMessage, reason: str) -> None:
        if self._metrics is not None:
            self._metrics.inc(MALFORMED_METRIC, binding, topic=message.topic)
        if (binding, message.topic) not in self._warned:
            self._warned.add((binding, message.topic))
            log.warning(
                "traces.traceparent_malformed",
                binding=binding,
                topic=message.topic,
                partition=message.partition,
                offset=message.offset,
                reason=reason,
                message="not parented to the producer's span; later ones are counted",
            )

    def finish(self, trace: BatchTrace) -> None:
        """The batch has been handed to every subscriber: its deliveries are done."""
        if self.current is trace:
            self.current = None
        now = time.time_ns()
        for record in trace.records:
            record.done_ns = max(now, record.last_write_ns)
            record.message = None
            for buffer in self._buffers:
                buffer.append(record)


def fetched_at(fetched: Sequence[tuple[int, int]], offset: int, default: int) -> int:
    """When the fetch pass that brought ``offset`` closed: the last mark at or before it."""
    found = default
    for first, stamp in fetched:
        if first > offset:
            break
        found = stamp
    if found == default and fetched:
        found = fetched[0][1]
    return found


DELIVERY = DeliveryTraces()
"""The process's delivery tracing (its hooks are on the fetch and fan-out path)."""

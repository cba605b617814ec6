"""How far behind Kafka this process is: per-partition lag and the fan-out backlog, as gauges.

Two sampled gauges (:meth:`~ssegate.telemetry.metrics.Metrics.sample`: read at each export,
nothing per record) per ``kafka`` cache_server binding, for an autoscaler to read
(docs/scale-out.md, "Autoscaling"):

- ``ssegate.kafka.partition.lag`` (records; attributes ``topic``, ``partition``): for each
  partition the shared fetch reads, the partition's log end offset (its high watermark) minus
  the next offset this process's loop has taken in: the ``next_offset`` of the last batch the
  loop appended to the partition's cache and handed to its live subscribers (or, before the
  first, the offset the fetch started at). Records the fetch thread holds, records waiting in
  the hand-over to a busy loop (:mod:`~.handover`) and records not fetched yet all count.
  The log end is what the fetch last heard from the brokers: at a topic's start (and at added
  partitions) it asks for it, and then librdkafka updates it from every fetch answer, read
  every :data:`~.shared_fetch.LOG_END_INTERVAL` from its cache without a request. While
  librdkafka fetches nothing (its queue of prefetched records is full because the loop is
  far behind, or the broker is away), the end stands still, so the lag shown is at least what
  the process had already heard of and can be less than the truth; the backlog gauge below and
  ``ssegate.kafka.fetch.stalls`` show the first case, ``ssegate.kafka.broker.available`` the
  second. A log whose last offsets are transaction markers, which no batch carries, shows
  those markers as lag (one or two records per partition) until a record follows them.
- ``ssegate.kafka.fanout.pending`` (messages): records fetched and handed over to the loop that
  the loop has not yet fanned out (:attr:`~.handover.Handover.pending`): work waiting in this
  process because the loop is busy. Bytes held for stalled clients
  (:mod:`ssegate.bindings.sse.hold`) are not in it: they wait on the clients, not on the
  process, and another pod would not take them sooner.

Under ``start --workers N`` worker 0 fetches for all (:mod:`~.host_fetch`). Every worker's lag
uses the ends worker 0 heard (worker 0's fetch thread sends them to the others as
:class:`~.fetch_events.LogEnds`, each worker's fetch thread takes them in as soon as it reads
them, past its loop's hand-over) and that worker's own loop's progress: a worker that has not
yet read, or not yet fanned out, a batch worker 0 sent is behind by that batch.

:class:`PartitionLag` is the pure part: the loop tells it what it took in, the fetch thread
replaces the ends it knows (a new mapping each time, so a read on the loop never sees one half
written), and :meth:`PartitionLag.lags` computes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from ssegate.bindings.kafka.fetch_events import Event, Fetched, PartitionsAdded, TopicStarted
from ssegate.telemetry.metrics import Metrics

LAG = "ssegate.kafka.partition.lag"
PENDING = "ssegate.kafka.fanout.pending"

PartitionKey = tuple[str, int]


class PartitionLag:
    """Per partition: the log end heard of, and the next offset the loop took in."""

    __slots__ = ("_ends", "_next", "_started_ends")

    def __init__(self) -> None:
        self._ends: Mapping[PartitionKey, int] = {}
        """The ends the fetch thread heard last; replaced whole, never changed in place."""
        self._started_ends: dict[PartitionKey, int] = {}
        """The ends a topic start reported on the loop, until the thread reports its own."""
        self._next: dict[PartitionKey, int] = {}

    def set_ends(self, ends: Mapping[PartitionKey, int]) -> None:
        """From the fetch thread: the ends it knows now (``ends`` is not changed afterwards)."""
        self._ends = ends

    def observe(self, event: Event) -> None:
        """On the loop, for each event it takes in: a batch of the shared fetch moves its
        partition's progress; a topic start or added partitions set where progress begins."""
        if isinstance(event, Fetched):
            if not event.catch_up:
                self._next[(event.topic, event.partition)] = event.next_offset
        elif isinstance(event, TopicStarted):
            for partition, start in event.starts.items():
                key = (event.topic, partition)
                self._next[key] = start
                end = event.ends.get(partition)
                if end is not None:
                    self._started_ends[key] = end
        elif isinstance(event, PartitionsAdded):
            for partition, start in event.starts.items():
                self._next.setdefault((event.topic, partition), start)

    def lags(self) -> dict[PartitionKey, int]:
        """Records behind the log end, per partition whose end is known (never below 0: an end
        heard before a batch the loop has since taken in is simply old)."""
        ends = self._ends
        found: dict[PartitionKey, int] = {}
        for key, next_offset in list(self._next.items()):
            end = ends.get(key, self._started_ends.get(key))
            if end is not None:
                found[key] = max(0, end - next_offset)
        return found


def register(metrics: Metrics, binding: str, pending: Callable[[], int]) -> PartitionLag:
    """A new :class:`PartitionLag`, sampled as ``binding``'s lag gauge, and the hand-over's
    ``pending`` messages as its backlog gauge."""
    lag = PartitionLag()

    def lags() -> Iterable[tuple[Mapping[str, str], float]]:
        return [
            ({"topic": topic, "partition": str(partition)}, float(behind))
            for (topic, partition), behind in sorted(lag.lags().items())
        ]

    def waiting() -> Iterable[tuple[Mapping[str, str], float]]:
        return (({}, float(pending())),)

    metrics.sample(LAG, lags, binding)
    metrics.sample(PENDING, waiting, binding)
    return lag

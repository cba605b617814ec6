"""What the failover scenario checks at every client, and the delivery gap after a kill. Pure.

The producer numbers the messages of each partition ``0, 1, 2, ...`` and keeps, per partition,
when it produced each one and with which key, and which of them Kafka acknowledged
(:class:`Produced`). A stream is owed the acknowledged messages its filter accepts: all of them
(``/events``) or those of one key (``/events/k<i>``, whose messages all sit in one partition).
:func:`check_stream` compares what a stream read (:class:`~.sequence_readers.StreamRecord`) with
that:

- **lost**: owed and never read;
- **duplicates**: read more than once;
- **out of order**: read after a later message of the same partition;
- **unexpected**: read, but not owed (not acknowledged, or another key's).

A stream that the gateway ended and that came back with its last event id (``reconnects``) is
complete all the same when it read everything once; one that could not come back is not.

:func:`delivery_gap` measures an outage as a client sees it: from the moment a node was killed
until the stream read the first message produced after that moment, per partition, worst over
the unfiltered streams.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from ssegate_lab.bench.sequence_readers import StreamRecord

KEYED_PREFIX = "/events/"


@dataclass(slots=True)
class Produced:
    """What the producer sent and Kafka acknowledged, per partition, by sequence number."""

    partitions: int
    sent_ns: dict[int, array[int]] = field(default_factory=dict)
    """Partition → ``time.monotonic_ns`` at which sequence ``s`` was produced, at index ``s``."""
    keys: dict[int, array[int]] = field(default_factory=dict)
    """Partition → the key index of sequence ``s`` (its key is ``k<index>``)."""
    acked: dict[int, set[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for partition in range(self.partitions):
            self.sent_ns.setdefault(partition, array("q"))
            self.keys.setdefault(partition, array("q"))
            self.acked.setdefault(partition, set())

    def owed(self, path: str) -> dict[int, list[int]]:
        """Partition → the acknowledged sequence numbers ``path``'s stream should read."""
        if not path.startswith(KEYED_PREFIX):
            return {p: sorted(acked) for p, acked in self.acked.items()}
        key = int(path.removeprefix(KEYED_PREFIX).removeprefix("k"))
        partition = key % self.partitions
        keys = self.keys[partition]
        return {partition: sorted(s for s in self.acked[partition] if keys[s] == key)}


@dataclass(frozen=True, slots=True)
class StreamVerdict:
    path: str
    owed: int
    received: int
    lost: int
    duplicates: int
    out_of_order: int
    unexpected: int
    reconnects: int
    closed_early: bool

    @property
    def complete(self) -> bool:
        """Every owed message once, in order, nothing else, and the stream still open."""
        return not (
            self.lost or self.duplicates or self.out_of_order or self.unexpected
        ) and not self.closed_early and self.received == self.owed  # fmt: skip


def check_stream(record: StreamRecord, owed: dict[int, list[int]]) -> StreamVerdict:
    lost = duplicates = out_of_order = unexpected = 0
    for partition in set(owed) | set(record.sequences):
        wanted = set(owed.get(partition, ()))
        read = record.sequences.get(partition, array("q"))
        distinct = set(read)
        lost += len(wanted - distinct)
        unexpected += len(distinct - wanted)
        duplicates += len(read) - len(distinct)
        out_of_order += sum(1 for before, after in pairwise(read) if after < before)
    return StreamVerdict(
        record.path,
        sum(len(seqs) for seqs in owed.values()),
        record.received,
        lost,
        duplicates,
        out_of_order,
        unexpected,
        record.reconnects,
        record.closed_early,
    )


def check_streams(records: Iterable[StreamRecord], produced: Produced) -> list[StreamVerdict]:
    owed_by_path: dict[str, dict[int, list[int]]] = {}
    verdicts = []
    for record in records:
        owed = owed_by_path.get(record.path)
        if owed is None:
            owed = owed_by_path[record.path] = produced.owed(record.path)
        verdicts.append(check_stream(record, owed))
    return verdicts


def totals(verdicts: Sequence[StreamVerdict]) -> dict[str, int]:
    return {
        "streams": len(verdicts),
        "complete": sum(1 for v in verdicts if v.complete),
        "owed": sum(v.owed for v in verdicts),
        "received": sum(v.received for v in verdicts),
        "lost": sum(v.lost for v in verdicts),
        "duplicates": sum(v.duplicates for v in verdicts),
        "out_of_order": sum(v.out_of_order for v in verdicts),
        "unexpected": sum(v.unexpected for v in verdicts),
        "reconnects": sum(v.reconnects for v in verdicts),
        "closed_early": sum(1 for v in verdicts if v.closed_early),
    }


def delivery_gap(
    records: Iterable[StreamRecord], produced: Produced, killed_ns: int
) -> dict[int, float | None]:
    """Partition → seconds from ``killed_ns`` until an unfiltered stream read the partition's
    first message produced at or after it, the worst over those streams (``None``: some
    stream never read one). Empty without unfiltered streams."""
    first_after = {p: bisect.bisect_left(sent, killed_ns) for p, sent in produced.sent_ns.items()}
    worst: dict[int, float] = {}
    missing: set[int] = set()
    for record in records:
        if record.path.startswith(KEYED_PREFIX):
            continue
        for partition, first in first_after.items():
            index = _first_at_or_after(record.sequences.get(partition, array("q")), first)
            if index is None:
                missing.add(partition)
                continue
            seconds = (record.arrivals[partition][index] - killed_ns) / 1e9
            worst[partition] = max(seconds, worst.get(partition, seconds))
    return {p: None if p in missing else worst[p] for p in sorted({*worst, *missing})}


def _first_at_or_after(read: Sequence[int], sequence: int) -> int | None:
    """The index of the first read sequence number at or after ``sequence`` (linear, since an
    out-of-order stream is not sorted)."""
    for index, value in enumerate(read):
        if value >= sequence:
            return index
    return None

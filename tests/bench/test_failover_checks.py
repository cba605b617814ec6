"""The failover checks on hand-made streams: each fault counted as what it is."""

from __future__ import annotations

from ssegate_lab.bench.failover_checks import (
    Produced,
    check_stream,
    check_streams,
    delivery_gap,
    totals,
)
from ssegate_lab.bench.sequence_readers import StreamRecord, last_event_id

SECOND = 1_000_000_000


def produced(per_partition: int = 6, keys: int = 6) -> Produced:
    """``per_partition`` messages on each of 3 partitions, one a second from t = 10 s; key
    ``k<i>`` on partition ``i % 3``; all acknowledged."""
    result = Produced(3)
    for partition in range(3):
        for sequence in range(per_partition):
            result.sent_ns[partition].append((10 + sequence) * SECOND)
            result.keys[partition].append(partition + 3 * (sequence % (keys // 3)))
            result.acked[partition].add(sequence)
    return result


def record(
    path: str, reads: dict[int, list[int]], at: dict[int, list[float]] | None = None
) -> StreamRecord:
    stream = StreamRecord(path)
    for partition, sequences in reads.items():
        times = (at or {}).get(partition) or [0.0] * len(sequences)
        for sequence, seconds in zip(sequences, times, strict=True):
            stream.add(partition, sequence, int(seconds * SECOND))
    return stream


def test_an_unfiltered_stream_that_read_everything_once_in_order_is_complete() -> None:
    verdict = check_stream(record("/events", {p: list(range(6)) for p in range(3)}),
                           produced().owed("/events"))  # fmt: skip

    assert verdict.complete and (verdict.owed, verdict.received) == (18, 18)


def test_a_keyed_stream_is_owed_only_its_keys_messages_on_its_partition() -> None:
    owed = produced().owed("/events/k4")  # key 4: partition 1, sequences 1, 3, 5

    assert owed == {1: [1, 3, 5]}
    assert check_stream(record("/events/k4", {1: [1, 3, 5]}), owed).complete


def test_lost_duplicated_reordered_and_unexpected_messages_are_each_counted() -> None:
    source = produced()
    source.acked[0].discard(5)  # produced but never acknowledged
    reads = {0: [0, 2, 1, 1, 3, 4, 5], 1: list(range(6)), 2: list(range(5))}

    verdict = check_stream(record("/events", reads), source.owed("/events"))

    assert (verdict.lost, verdict.duplicates, verdict.out_of_order, verdict.unexpected) == (
        1, 1, 1, 1,
    )  # fmt: skip
    assert not verdict.complete


def test_a_stream_that_closed_early_is_not_complete() -> None:
    stream = record("/events", {p: list(range(6)) for p in range(3)})
    stream.closed_early = True

    assert not check_stream(stream, produced().owed("/events")).complete


def test_totals_add_up_the_streams() -> None:
    source = produced()
    streams = [
        record("/events", {p: list(range(6)) for p in range(3)}),
        record("/events/k4", {1: [1, 3, 3, 5]}),
    ]

    summed = totals(check_streams(streams, source))

    assert summed["streams"] == 2 and summed["complete"] == 1
    assert (summed["owed"], summed["received"], summed["duplicates"]) == (21, 22, 1)


def test_the_gap_is_from_the_kill_to_the_first_message_produced_after_it_worst_stream() -> None:
    source = produced()  # sequence s produced at 10 + s seconds
    killed = 12 * SECOND + SECOND // 2  # between sequences 2 and 3
    fast = record("/events", {p: list(range(6)) for p in range(3)},
                  {p: [10, 11, 12, 13, 14, 15] for p in range(3)})  # fmt: skip
    slow = record("/events", {p: list(range(6)) for p in range(3)},
                  {0: [10, 11, 12, 20, 20, 20], 1: [10, 11, 12, 13, 14, 15],
                   2: [10, 11, 12, 18, 18, 18]})  # fmt: skip
    keyed = record("/events/k4", {1: [1, 3, 5]}, {1: [11, 90, 90]})  # not measured

    gaps = delivery_gap([fast, slow, keyed], source, killed)

    assert gaps == {0: 7.5, 1: 0.5, 2: 5.5}


def test_a_stream_that_never_read_a_message_produced_after_the_kill_has_no_gap() -> None:
    source = produced()
    stuck = record("/events", {0: [0, 1, 2], 1: list(range(6)), 2: list(range(6))},
                   {0: [10, 11, 12], 1: [10, 11, 12, 13, 14, 15],
                    2: [10, 11, 12, 13, 14, 15]})  # fmt: skip

    assert delivery_gap([stuck], source, 12 * SECOND + 1)[0] is None


def test_the_resume_id_is_the_last_id_line_of_the_complete_events() -> None:
    events = b'id:AQIAAg\ndata:{"p":0,"s":0}\n\nid: AQIAAw\ndata:{"p":0,"s":1}\n'

    assert last_event_id(events) == "AQIAAw"
    assert last_event_id(b'id:AQIAAg\ndata:{"p":0,"s":0}\n') == "AQIAAg"
    assert last_event_id(b":\n") is None

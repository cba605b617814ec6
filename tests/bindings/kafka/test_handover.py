"""The hand-over from the fetch thread: batches that wait for a busy loop go out joined."""

from __future__ import annotations

import threading
from collections.abc import Callable

from ssegate.bindings.kafka.fetch_events import BrokerStatus, Event, Fetched, TopicsListed
from ssegate.bindings.kafka.handover import Handover, coalesce
from ssegate.bindings.kafka.repeats import Repeat
from ssegate.bindings.kafka.transforms import Field, Unextracted
from ssegate.kafka.topics import KafkaMessage


def batch(
    partition: int, offsets: range, *, invalid: list[tuple[int, str]] | None = None,
    catch_up: bool = False, ticket: int = 0, topic: str = "t",
) -> Fetched:  # fmt: skip
    messages = [KafkaMessage(topic, partition, o, None, b"v%d" % o) for o in offsets]
    return Fetched(topic, partition, messages, offsets.stop, invalid or [], catch_up, ticket)


def offsets(event: Event) -> list[int]:
    assert isinstance(event, Fetched)
    return [m.offset for m in event.messages]


def test_consecutive_batches_of_a_partition_join_into_one_in_offset_order() -> None:
    events, joined = coalesce(
        [batch(0, range(0, 3)), batch(0, range(3, 5), invalid=[(5, "bad")]), batch(0, range(6, 8))]
    )
    assert joined == 2
    [only] = events
    assert isinstance(only, Fetched)
    assert offsets(only) == [0, 1, 2, 3, 4, 6, 7]
    assert only.next_offset == 8
    assert only.invalid == [(5, "bad")]


def test_joined_batches_keep_the_repeats_each_passed_over() -> None:
    first, second = batch(0, range(0, 3)), batch(0, range(4, 6))  # 3 and 6 are repeats
    first = Fetched("t", 0, first.messages, 4, repeats=[Repeat(3, 1, b"id1")])
    second = Fetched("t", 0, second.messages, 7, repeats=[Repeat(6, 0, b"id0")])
    [only], joined = coalesce([first, second])
    assert joined == 1
    assert isinstance(only, Fetched)
    assert (offsets(only), only.next_offset) == ([0, 1, 2, 4, 5], 7)
    assert only.repeats == [Repeat(3, 1, b"id1"), Repeat(6, 0, b"id0")]


def test_joined_batches_keep_the_records_a_transform_could_not_extract_from() -> None:
    zone = Field("value", "zone")
    first = Fetched("t", 0, batch(0, range(0, 2)).messages, 2, unextracted=[Unextracted(1, zone)])
    second = Fetched("t", 0, batch(0, range(2, 4)).messages, 4, unextracted=[Unextracted(3, zone)])
    [only], joined = coalesce([first, second])
    assert joined == 1
    assert isinstance(only, Fetched)
    assert only.unextracted == [Unextracted(1, zone), Unextracted(3, zone)]


def test_each_partition_joins_with_its_own_batches_only() -> None:
    events, joined = coalesce(
        [batch(0, range(0, 2)), batch(1, range(0, 2)), batch(0, range(2, 4)), batch(1, range(2, 3))]
    )
    assert joined == 2
    assert [(e.partition, offsets(e)) for e in events if isinstance(e, Fetched)] == [
        (0, [0, 1, 2, 3]),
        (1, [0, 1, 2]),
    ]


def test_a_batch_never_joins_across_another_kind_of_event() -> None:
    down = BrokerStatus(False, "all brokers down")
    events, joined = coalesce([batch(0, range(0, 2)), down, batch(0, range(2, 4))])
    assert joined == 0
    assert events[1] is down
    assert [offsets(events[0]), offsets(events[2])] == [[0, 1], [2, 3]]


def test_the_periodic_topic_listing_does_not_separate_batches() -> None:
    listing = TopicsListed(frozenset({"t", "other"}))
    events, joined = coalesce([batch(0, range(0, 2)), listing, batch(0, range(2, 4))])
    assert joined == 1
    assert [offsets(events[0]), events[1]] == [[0, 1, 2, 3], listing]


def test_catch_up_batches_join_neither_the_shared_fetch_nor_another_reading() -> None:
    events, joined = coalesce(
        [
            batch(0, range(10, 12)),
            batch(0, range(0, 2), catch_up=True, ticket=1),
            batch(0, range(0, 2), catch_up=True, ticket=2),
            batch(0, range(2, 4), catch_up=True, ticket=2),
        ]
    )
    assert joined == 1
    assert [(e.catch_up, e.ticket, offsets(e)) for e in events if isinstance(e, Fetched)] == [
        (False, 0, [10, 11]),
        (True, 1, [0, 1]),
        (True, 2, [0, 1, 2, 3]),
    ]


class ManualLoop:
    """Runs what the hand-over schedules only when told to, like a busy event loop."""

    def __init__(self) -> None:
        self.scheduled: list[Callable[[], None]] = []
        self.lock = threading.Lock()

    def schedule(self, callback: Callable[[], None]) -> None:
        with self.lock:
            self.scheduled.append(callback)

    def run_pending(self) -> None:
        with self.lock:
            ready, self.scheduled = self.scheduled, []
        for callback in ready:
            callback()


def test_puts_while_a_drain_is_pending_schedule_one_drain_that_gets_them_all() -> None:
    loop = ManualLoop()
    received: list[tuple[list[Event], int]] = []
    handover = Handover(loop.schedule, lambda events, joined: received.append((events, joined)))
    for start in range(0, 10, 2):
        handover.put([batch(0, range(start, start + 2))])
    assert len(loop.scheduled) == 1
    loop.run_pending()
    [(events, joined)] = received
    assert joined == 4
    assert [offsets(e) for e in events] == [list(range(10))]

    handover.put([batch(0, range(10, 11))])  # the loop is idle again: a drain right away
    assert len(loop.scheduled) == 1
    loop.run_pending()
    assert [offsets(e) for e in received[1][0]] == [[10]]


def test_a_thread_putting_while_the_loop_drains_loses_and_repeats_nothing() -> None:
    loop = ManualLoop()
    seen: list[int] = []
    handover = Handover(loop.schedule, lambda events, _: seen.extend(
        o for e in events for o in offsets(e)))  # fmt: skip
    done = threading.Event()

    def fetch_thread() -> None:
        for start in range(0, 20_000, 10):
            handover.put([batch(0, range(start, start + 10))])
        done.set()

    thread = threading.Thread(target=fetch_thread)
    thread.start()
    while not done.is_set():
        loop.run_pending()
    thread.join()
    loop.run_pending()
    assert seen == list(range(20_000))


def test_a_drain_out_of_time_hands_the_loop_back_and_goes_on_in_order() -> None:
    loop = ManualLoop()
    clock = [0.0]
    seen: list[tuple[int, list[int]]] = []

    def consume(events: list[Event], _: int) -> None:
        clock[0] += 0.01  # each partition's fan-out takes 10 ms
        seen.extend((e.partition, offsets(e)) for e in events if isinstance(e, Fetched))

    handover = Handover(loop.schedule, consume, slice_seconds=0.025, clock=lambda: clock[0])
    handover.put([batch(p, range(0, 3)) for p in range(6)])
    loop.run_pending()
    assert [p for p, _ in seen] == [0, 1, 2]  # the slice ran out: the loop is free again
    assert len(loop.scheduled) == 1
    handover.put([batch(0, range(3, 5))])  # arrives behind what is left
    while loop.scheduled:
        loop.run_pending()
    assert [p for p, _ in seen] == [0, 1, 2, 3, 4, 5, 0]
    assert seen[-1] == (0, [3, 4]) and handover.pending == 0


def test_a_fetch_thread_over_the_bound_waits_until_the_loop_works_it_down() -> None:
    loop = ManualLoop()
    stalls: list[int] = []
    handover = Handover(loop.schedule, lambda events, _: None, on_stall=stalls.append,
                        max_pending=100)  # fmt: skip
    handover.put([batch(0, range(0, 150))])  # over the bound now
    second_put_done = threading.Event()

    def fetch_thread() -> None:
        handover.put([batch(0, range(150, 160))])
        second_put_done.set()

    thread = threading.Thread(target=fetch_thread)
    thread.start()
    assert not second_put_done.wait(0.3)  # waits: nothing grows while the loop is behind
    assert handover.pending == 150
    loop.run_pending()
    assert second_put_done.wait(5)
    thread.join()
    loop.run_pending()
    assert stalls == [1] and handover.pending == 0


def test_close_lets_a_waiting_fetch_thread_go() -> None:
    loop = ManualLoop()
    handover = Handover(loop.schedule, lambda events, _: None, max_pending=10)
    handover.put([batch(0, range(0, 20))])
    thread = threading.Thread(target=lambda: handover.put([batch(0, range(20, 30))]))
    thread.start()
    handover.close()
    thread.join(5)
    assert not thread.is_alive()


def test_a_joined_batch_holds_at_most_max_joined_messages() -> None:
    events, _ = coalesce([batch(0, range(n, n + 4000)) for n in range(0, 16_000, 4000)])
    assert [len(e.messages) for e in events if isinstance(e, Fetched)] == [8000, 8000]

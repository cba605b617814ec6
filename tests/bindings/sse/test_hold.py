"""Holds: what a stream whose client reads nothing keeps, alone or on its group's shared log."""

from __future__ import annotations

from ssegate.bindings.sse.hold import Hold, SharedLog


def test_a_hold_keeps_writes_in_order_and_gives_them_back_as_one() -> None:
    hold = Hold()
    hold.add(b"a")
    hold.add(b"bc")
    assert hold.size == 3
    assert hold.take() == b"abc"
    assert (hold.size, hold.take()) == (0, b"")


def test_a_write_is_kept_once_for_every_hold_on_the_log() -> None:
    log = SharedLog()
    log.append(b"before")  # nobody holds: nothing kept
    first = log.hold(lambda: None)
    log.append(b"1")
    second = log.hold(lambda: None)
    log.append(b"22")
    assert log.entries == 2
    assert (first.size, second.size) == (3, 2)
    assert first.take() == b"122"
    assert second.take() == b"22"


def test_a_write_to_one_held_stream_alone_stays_in_order_with_the_log() -> None:
    log = SharedLog()
    hold = log.hold(lambda: None)
    log.append(b"1")
    hold.add(b"[own]")
    log.append(b"2")
    assert hold.size == 7
    assert hold.take() == b"1[own]2"


def test_the_log_forgets_what_no_hold_reads_any_more() -> None:
    log = SharedLog()
    oldest = log.hold(lambda: None)
    log.append(b"1")
    newer = log.hold(lambda: None)
    log.append(b"2")
    oldest.release()
    assert log.entries == 1  # "1" was only the oldest's
    log.append(b"3")
    assert newer.take() == b"23"
    newer.release()
    assert (len(log), log.entries) == (0, 0)
    log.append(b"4")
    assert log.entries == 0


def test_a_hold_that_caught_up_no_longer_keeps_the_log_from_where_it_began() -> None:
    log = SharedLog()
    first = log.hold(lambda: None)
    log.append(b"1")
    second = log.hold(lambda: None)
    log.append(b"2")
    first.add(b"!")  # takes "12" into its own parts: it reads the log from the end now
    log.append(b"3")
    second.release()  # the oldest reader left: only "3" is read still
    assert log.entries == 1
    assert first.take() == b"12!3"


def test_releasing_a_hold_tells_its_owner_once() -> None:
    told: list[str] = []
    log = SharedLog()
    hold = log.hold(lambda: told.append("released"))
    hold.release()
    hold.release()
    assert told == ["released"]


def test_a_detached_hold_keeps_what_the_log_held_for_it() -> None:
    told: list[str] = []
    log = SharedLog()
    hold = log.hold(lambda: told.append("released"))
    log.append(b"1")
    hold.detach()
    log.append(b"2")  # not its group any more
    assert told == ["released"]
    assert (hold.size, hold.take()) == (1, b"1")
    assert len(log) == 0

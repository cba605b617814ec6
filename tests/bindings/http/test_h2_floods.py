"""Frame budgets: which frames spend which budget, wherever reads split them, and refilling."""

from __future__ import annotations

import itertools

from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    HeadersFrame,
    PingFrame,
    PriorityFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from ssegate.bindings.http.h2_floods import (
    CONTINUATION,
    EMPTY_DATA,
    EXTENSION,
    PING,
    PRIORITY,
    RST_STREAM,
    SETTINGS,
    WINDOW_UPDATE,
    Flood,
    FrameBudgets,
    InboundFrames,
)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
BUDGETS = FrameBudgets(
    settings=2,
    ping=2,
    empty_data=2,
    rst_stream=2,
    window_update=2,
    priority=2,
    extension=2,
    burst=1.0,
)
"""Two frames of each kind at once, two more every second."""


def extension(payload: bytes = b"x", frame_type: int = 0xF0) -> bytes:
    """A frame of a type HTTP/2 does not define, on stream 0."""
    return len(payload).to_bytes(3, "big") + bytes([frame_type, 0]) + bytes(4) + payload


def ping(ack: bool = False) -> bytes:
    return PingFrame(0, b"01234567", flags=["ACK"] if ack else []).serialize()


def empty_data(stream_id: int = 1, pad: int | None = None, end: bool = False) -> bytes:
    frame = DataFrame(stream_id, b"", flags=["END_STREAM"] if end else [])
    if pad is not None:
        frame.flags.add("PADDED")
        frame.pad_length = pad
    return frame.serialize()


def frames() -> InboundFrames:
    return InboundFrames(BUDGETS, max_header_bytes=1024)


def test_the_frame_past_the_budget_is_reported_where_it_starts() -> None:
    wire = PREFACE + SettingsFrame(0).serialize() + ping() + ping() + ping() + ping()
    flood = frames().scan(wire, now=0.0)
    assert flood == Flood(PING, len(PREFACE) + 9 + 2 * 17)


def test_the_budget_refills_at_its_rate_up_to_its_burst() -> None:
    inbound = frames()
    assert inbound.scan(PREFACE + ping() + ping(), now=0.0) is None
    assert inbound.scan(ping(), now=0.2) == Flood(PING, 0)
    inbound = frames()
    assert inbound.scan(PREFACE + ping() + ping(), now=0.0) is None
    assert inbound.scan(ping() + ping(), now=10.0) is None  # refilled to two, not twenty
    assert inbound.scan(ping(), now=10.0) == Flood(PING, 0)


def test_each_kind_spends_its_own_budget() -> None:
    cases = {
        SETTINGS: SettingsFrame(0).serialize(),
        PING: ping(ack=True),
        EMPTY_DATA: empty_data(),
        RST_STREAM: RstStreamFrame(1, error_code=8).serialize(),
        WINDOW_UPDATE: WindowUpdateFrame(0, window_increment=1).serialize(),
        PRIORITY: PriorityFrame(3, depends_on=0, stream_weight=15).serialize(),
        EXTENSION: extension(),
    }
    for kind, frame in cases.items():
        inbound = frames()
        others = b"".join(f for k, f in cases.items() if k != kind)
        assert inbound.scan(PREFACE + others + frame + frame, now=0.0) is None, kind
        assert inbound.scan(frame, now=0.0) == Flood(kind, 0), kind


def test_data_that_ends_its_stream_or_carries_bytes_is_not_empty() -> None:
    inbound = frames()
    carrying = DataFrame(1, b"x").serialize()
    wire = PREFACE + empty_data(end=True) * 5 + carrying * 5 + empty_data(pad=3)
    assert inbound.scan(wire, now=0.0) is None
    assert inbound.scan(empty_data(pad=0) + empty_data(), now=0.0) == Flood(EMPTY_DATA, 10)


def test_a_padded_empty_data_frame_split_before_its_pad_length_is_still_counted() -> None:
    inbound = frames()
    frame = empty_data(pad=4)
    assert inbound.scan(PREFACE + empty_data() + empty_data(), now=0.0) is None
    assert inbound.scan(frame[:9], now=0.0) is None
    assert inbound.scan(frame[9:], now=0.0) == Flood(EMPTY_DATA, 0)


def test_window_updates_earned_by_data_sent_spend_no_budget() -> None:
    inbound = frames()
    inbound.window_updates_earned = 10
    update = WindowUpdateFrame(1, window_increment=100).serialize()
    assert inbound.scan(PREFACE + update * 12, now=0.0) is None
    assert inbound.scan(update, now=0.0) == Flood(WINDOW_UPDATE, 0)


def test_a_header_block_longer_than_any_accepted_list_is_a_continuation_flood() -> None:
    inbound = InboundFrames(BUDGETS, max_header_bytes=1024, max_frame_size=2048)
    start = HeadersFrame(1, b"\x82" * 100).serialize()  # no END_HEADERS
    more = ContinuationFrame(1, b"\x82" * 1400).serialize()
    assert inbound.scan(PREFACE + start + more + more, now=0.0) is None  # 2900 bytes
    assert inbound.scan(more, now=0.0) == Flood(CONTINUATION, 0)  # 4300 > 1024 + 2048


def test_a_complete_header_block_resets_the_count() -> None:
    inbound = InboundFrames(BUDGETS, max_header_bytes=1024, max_frame_size=2048)
    start = HeadersFrame(1, b"\x82" * 100).serialize()
    last = ContinuationFrame(1, b"\x82" * 1500, flags=["END_HEADERS"]).serialize()
    wire = PREFACE + (start + last) * 5
    assert inbound.scan(wire, now=0.0) is None


def test_settings_and_pings_that_want_an_answer_are_counted_as_owed() -> None:
    inbound = InboundFrames(FrameBudgets(), max_header_bytes=1024)
    ack = SettingsFrame(0, flags=["ACK"]).serialize()
    inbound.scan(PREFACE + SettingsFrame(0).serialize() + ack + ping() + ping(ack=True), 0.0)
    assert inbound.acks_owed == 2


SAMPLE: list[bytes] = [
    frame.serialize()
    for frame in [
        SettingsFrame(0, settings={4: 65535}),
        PingFrame(0, b"abcdefgh"),
        DataFrame(1, b"", flags=["PADDED"]),
        DataFrame(1, b"payload"),
        WindowUpdateFrame(0, window_increment=5),
        HeadersFrame(3, b"\x82\x84"),
        ContinuationFrame(3, b"\x86", flags=["END_HEADERS"]),
        PriorityFrame(5, depends_on=3),
        RstStreamFrame(3, error_code=8),
    ]
] + [extension(b"extension payload", 0xFA)]


@settings(max_examples=150, deadline=None)
@given(
    picks=st.lists(st.integers(0, len(SAMPLE) - 1), min_size=1, max_size=40),
    cuts=st.lists(st.integers(0, 2000), max_size=12),
)
def test_how_reads_split_the_bytes_never_changes_the_verdict(
    picks: list[int], cuts: list[int]
) -> None:
    wire = PREFACE + b"".join(SAMPLE[i] for i in picks)
    whole = frames().scan(wire, now=0.0)
    inbound = frames()
    split = None
    points = sorted({c % (len(wire) + 1) for c in cuts} | {0, len(wire)})
    for begin, end in itertools.pairwise(points):
        split = inbound.scan(wire[begin:end], now=0.0)
        if split is not None:
            assert whole is not None
            assert split.kind == whole.kind
            assert split.offset == max(0, whole.offset - begin)
            break
    assert (split is None) == (whole is None)

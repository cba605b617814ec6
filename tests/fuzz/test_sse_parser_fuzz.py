"""The SSE parser on hostile upstream bytes: events or ``SseParseError``, however they are read.

An upstream SSE server (the sse client binding reads it) may send anything: invalid UTF-8,
NULs, lone CRs, BOMs, endless lines. Whatever the bytes and however a socket splits them, the
parser returns the same events, ids and retry, or raises its one declared error; nothing else.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ssegate.sse_codec.parser import SseEvent, SseIdOnly, SseParseError, SseParser

from .profiles import FUZZ, cuts

PIECES = [
    b"data",
    b"data:",
    b"data: ",
    b"id:",
    b"id: 7",
    b"event:",
    b"retry:",
    b"retry: 1500",
    b":",
    b" ",
    b"\r",
    b"\n",
    b"\r\n",
    b"\xef\xbb\xbf",  # BOM
    b"\x00",
    b"\xff",
    b"\xe2\x82",  # the start of a 3-byte character
    b"\xac",
    b"\xf0\x9f\x98\x80",
    b"x",
]
STREAMS = st.one_of(
    st.binary(max_size=400),
    st.lists(st.sampled_from(PIECES) | st.binary(max_size=6), max_size=80).map(b"".join),
)
Outcome = tuple[list[SseEvent | SseIdOnly], str, int | None] | str


def outcome(parser: SseParser, reads: list[bytes]) -> Outcome:
    """What ``parser`` makes of ``reads``: events, last id and retry, or the declared error."""
    events: list[SseEvent | SseIdOnly] = []
    try:
        for read in reads:
            events.extend(parser.feed(read))
    except SseParseError as exc:
        assert str(exc)
        return "refused"
    return events, parser.last_event_id, parser.retry


def parse(reads: list[bytes], limit: int | None) -> Outcome:
    return outcome(SseParser(max_event_size=limit) if limit else SseParser(), reads)


@FUZZ
@given(
    body=STREAMS,
    points=st.lists(st.integers(0, 1000), max_size=10),
    limit=st.integers(1, 48) | st.none(),
)
def test_any_bytes_read_in_any_pieces_give_the_same_events_or_the_declared_error(
    body: bytes, points: list[int], limit: int | None
) -> None:
    assert parse(cuts(body, points), limit) == parse([body], limit)


@FUZZ
@given(bodies=st.lists(STREAMS, min_size=1, max_size=4))
def test_a_parser_closed_between_streams_reads_the_next_like_a_fresh_one_with_its_last_id(
    bodies: list[bytes],
) -> None:
    parser = SseParser()
    for body in bodies:
        retry = parser.retry
        expected = outcome(SseParser(last_event_id=parser.last_event_id), [body])
        if isinstance(expected, tuple) and expected[2] is None:
            expected = (expected[0], expected[1], retry)
        assert outcome(parser, [body]) == expected
        parser.close()

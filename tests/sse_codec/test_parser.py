"""SseParser against the WHATWG event-stream rules, each case also fed in every possible split.

The table holds one case per wire rule plus cases modelled on the behaviours that the
web-platform-tests ``eventsource/format-*`` tests and the eventsource-parser package check.
Every case is fed whole, split in two at every byte boundary, split in three at every pair of
boundaries (short cases), and byte by byte; all must give the same result.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from ssegate.sse_codec.parser import SseEvent, SseIdOnly, SseParseError, SseParser

Item = SseEvent | SseIdOnly


def msg(data: str, id: str = "", type: str = "message") -> SseEvent:
    return SseEvent(type=type, data=data, id=id)


@dataclass(frozen=True)
class Case:
    name: str
    wire: bytes
    items: list[Item]
    last_event_id: str = ""
    retry: int | None = None


_LONG = "x" * 2048

CASES = [
    # 1. always UTF-8, invalid bytes become U+FFFD
    Case("utf8_multibyte", "data:ok…\n\n".encode(), [msg("ok…")]),
    Case("utf8_cjk", "data:我現在都看實況不玩遊戲\n\n".encode(), [msg("我現在都看實況不玩遊戲")]),
    Case("utf8_four_byte", "data:😀\n\n".encode(), [msg("😀")]),
    Case("utf8_invalid_byte", b"data:a\xffb\n\n", [msg("a\ufffdb")]),
    Case("utf8_truncated_sequence", b"data:\xe2\x80\n\n", [msg("\ufffd")]),
    Case("utf8_encoded_surrogate", b"data:\xed\xa0\x80\n\n", [msg("\ufffd" * 3)]),
    # 2. exactly one leading BOM
    Case("bom_leading_stripped", b"\xef\xbb\xbfdata:1\n\n", [msg("1")]),
    Case(
        "bom_twice_loses_first_event",
        b"\xef\xbb\xbf\xef\xbb\xbfdata:1\n\ndata:2\n\ndata:3\n\n",
        [msg("2"), msg("3")],
    ),
    Case(
        "bom_mid_stream_spoils_field_name",
        b"\xef\xbb\xbfdata:1\n\n\xef\xbb\xbfdata:2\n\ndata:3\n\n",
        [msg("1"), msg("3")],
    ),
    Case("bom_inside_value_kept", b"data:a\xef\xbb\xbfb\n\n", [msg("a\ufeffb")]),
    # 3. CRLF, LF and lone CR end lines
    Case("lf", b"data:cow\ndata:moo\n\n", [msg("cow\nmoo")]),
    Case("cr", b"data:dog\rdata:bark\r\r", [msg("dog\nbark")]),
    Case("crlf", b"data:sheep\r\ndata:bleat\r\n\r\n", [msg("sheep\nbleat")]),
    Case("mixed_endings", b"data:a\rdata:b\r\ndata:c\n\r\n", [msg("a\nb\nc")]),
    Case("cr_then_crlf_is_two_line_ends", b"data:a\r\r\ndata:b\n\n", [msg("a"), msg("b")]),
    Case("lf_then_cr_is_two_line_ends", b"data:a\n\rdata:b\n\n", [msg("a"), msg("b")]),
    Case(
        "crlf_split_across_reads_is_one_line_end",
        b"data: A\r\ndata: B\r\ndata: C\r\n\n",
        [msg("A\nB\nC")],
    ),
    # 4. dispatch only on a blank line; partial block discarded with its id
    Case("no_blank_line_no_event", b"data:a\n", []),
    Case("no_line_end_no_event", b"data:a", []),
    Case(
        "partial_block_at_close_does_not_commit_id",
        b"id:1\ndata:a\n\nid:2\ndata:b\n",
        [msg("a", "1")],
        last_event_id="1",
    ),
    Case(
        "data_before_final_empty_line",
        b"retry:1000\ndata:test1\n\nid:test\ndata:test2",
        [msg("test1")],
        retry=1000,
    ),
    Case("leading_blank_lines_dispatch_nothing", b"\n\n\r\ndata:a\n\n", [msg("a")]),
    # 5. comments
    Case("comment_only", b":hello\n\n:\n\n", []),
    Case(
        "comment_fest",
        (f"data:1\r:\0\n:\r\ndata:2\n:{_LONG}\rdata:3\n:data:fail\r:{_LONG}\ndata:4\n\n").encode(),
        [msg("1\n2\n3\n4")],
    ),
    Case("comment_between_data_lines", b"data:a\n: note\ndata:b\n\n", [msg("a\nb")]),
    # 6. field name, one leading space, no colon, unknown fields
    Case("one_leading_space_removed", b"data: a\n\n", [msg("a")]),
    Case("only_one_space_removed", b"data:  two\n\n", [msg(" two")]),
    Case("tab_not_removed", b"data:\tx\n\n", [msg("\tx")]),
    Case("space_only_value_is_empty", b"data: \n\n", [msg("")]),
    Case("name_up_to_first_colon", b"data: a:b: c\n\n", [msg("a:b: c")]),
    Case("names_are_case_sensitive", b"Data:x\nDATA:y\n\ndata:z\n\n", [msg("z")]),
    Case("unknown_field_ignored", b"foo:bar\ndata:y\nfoo\n\n", [msg("y")]),
    Case("space_before_colon_is_part_of_name", b"data :x\n\ndata:y\n\n", [msg("y")]),
    # 7. data
    Case(
        "data_field_parsing",
        b"data:\n\ndata\ndata\n\ndata:test\n\n",
        [msg(""), msg("\n"), msg("test")],
    ),
    Case("data_lines_joined_with_lf", b"data:a\ndata:b\ndata:c\n\n", [msg("a\nb\nc")]),
    Case("only_one_trailing_lf_removed", b"data:a\ndata:\n\n", [msg("a\n")]),
    Case("nul_in_data_kept", b"data:\x00\n\n", [msg("\x00")]),
    Case(
        "block_without_data_dispatches_nothing",
        b"event:x\n\nretry:5\n\n",
        [],
        retry=5,
    ),
    # 8. event type
    Case(
        "event_type_does_not_carry_over",
        b"event:test\ndata:x\n\ndata:x\n\n",
        [msg("x", type="test"), msg("x")],
    ),
    Case("empty_event_type_is_message", b"event: \ndata:data\n\n", [msg("data")]),
    Case("event_type_reset_by_block_without_data", b"event:x\n\ndata:y\n\n", [msg("y")]),
    Case("last_event_field_wins", b"event:a\nevent:b\ndata:y\n\n", [msg("y", type="b")]),
    # 9. id
    Case(
        "id_persists",
        b"id: 1\ndata: 1\n\ndata:2\n\n",
        [msg("1", "1"), msg("2", "1")],
        last_event_id="1",
    ),
    Case(
        "id_changes_and_persists",
        b"id: 1\ndata: 1\n\nid: 2\ndata:2\n\ndata:3\n\n",
        [msg("1", "1"), msg("2", "2"), msg("3", "2")],
        last_event_id="2",
    ),
    Case(
        "empty_id_resets",
        b"id: 1\ndata: 1\n\nid:\ndata:2\n\ndata:3\n\n",
        [msg("1", "1"), msg("2"), msg("3")],
    ),
    Case(
        "id_with_nul_ignored",
        b"id: 123\nid: bad\x00id\ndata: hello\n\n",
        [msg("hello", "123")],
        last_event_id="123",
    ),
    Case("id_of_only_nul_ignored", b"id:\x00\x00\ndata:hello\n\n", [msg("hello")]),
    Case(
        "id_without_data_is_committed",
        b"id:5\n\n",
        [SseIdOnly("5")],
        last_event_id="5",
    ),
    Case(
        "id_without_data_then_event_carries_it",
        b"id:7\nevent:x\n\ndata:y\n\n",
        [SseIdOnly("7"), msg("y", "7")],
        last_event_id="7",
    ),
    Case(
        "unchanged_id_without_data_reported_once",
        b"id:5\n\nid:5\n\n",
        [SseIdOnly("5")],
        last_event_id="5",
    ),
    Case(
        "empty_id_without_data_resets_and_is_reported",
        b"id:1\ndata:a\n\nid:\n\n",
        [msg("a", "1"), SseIdOnly("")],
    ),
    Case(
        "id_with_nul_without_data_reports_nothing",
        b"id:bad\x00\n\n",
        [],
    ),
    Case("id_keeps_extra_leading_space", b"id:  a\ndata:x\n\n", [msg("x", " a")], " a"),
    Case("id_line_without_colon_resets", b"id:1\n\nid\n\n", [SseIdOnly("1"), SseIdOnly("")]),
    # 10. retry
    Case("retry_digits", b"retry:2000\n", [], retry=2000),
    Case("retry_bogus_ignored", b"retry:2000\nretry:1000x\ndata:x\n\n", [msg("x")], retry=2000),
    Case("retry_leading_space_removed", b"retry: 500\n\n", [], retry=500),
    Case("retry_zero", b"retry:0\n\n", [], retry=0),
    Case("retry_empty_ignored", b"retry:\nretry\n\n", []),
    Case("retry_negative_ignored", b"retry:-1\n\n", []),
    Case("retry_fraction_ignored", b"retry:1.5\n\n", []),
    Case("retry_trailing_space_ignored", b"retry:15 \n\n", []),
    Case("retry_non_ascii_digits_ignored", "retry:١٢\n\n".encode(), []),
    Case(
        "retry_and_id_blocks",
        b"retry:50\nid:1337\nevent:tick\ndata:1337\n\nretry:50\nid:1338\nevent:tick\ndata:1338\n\n",
        [msg("1337", "1337", "tick"), msg("1338", "1338", "tick")],
        last_event_id="1338",
        retry=50,
    ),
    # a Zilla-shaped stream, as the SSE server writes it
    Case(
        "zilla_format",
        b"id:AQQABAIC\nevent:delete\ndata:a2V5\n\n:\n\nid:AQQABgIC\ndata:a\ndata:b\n\n",
        [msg("a2V5", "AQQABAIC", "delete"), msg("a\nb", "AQQABgIC")],
        last_event_id="AQQABgIC",
    ),
]


def _run(chunks: list[bytes]) -> tuple[list[Item], str, int | None]:
    parser = SseParser()
    items: list[Item] = []
    for chunk in chunks:
        items.extend(parser.feed(chunk))
    parser.close()
    return items, parser.last_event_id, parser.retry


def _splits(wire: bytes) -> list[list[bytes]]:
    splits = [[wire], [bytes([b]) for b in wire]]
    splits += [[wire[:i], wire[i:]] for i in range(len(wire) + 1)]
    if len(wire) <= 64:
        splits += [
            [wire[:i], wire[i:j], wire[j:]]
            for i in range(1, len(wire))
            for j in range(i + 1, len(wire))
        ]
    return splits


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_conformance_case_gives_same_result_however_the_bytes_are_split(case: Case) -> None:
    expected = (case.items, case.last_event_id, case.retry)
    for chunks in _splits(case.wire):
        assert _run(chunks) == expected, f"chunks: {chunks!r}"


def test_case_names_are_unique() -> None:
    assert len({c.name for c in CASES}) == len(CASES)


def test_events_are_returned_by_the_read_that_completes_them() -> None:
    parser = SseParser()
    assert parser.feed(b"data: A\r\n") == []
    assert parser.feed(b"data: B\r") == []
    assert parser.feed(b"\n") == []
    assert parser.feed(b"data: C\r\n") == []
    assert parser.feed(b"\n") == [msg("A\nB\nC")]


def test_cr_ending_a_read_dispatches_without_waiting_for_the_next_read() -> None:
    parser = SseParser()
    assert parser.feed(b"data:a\r\r") == [msg("a")]
    assert parser.feed(b"\ndata:b\n\n") == [msg("b")]


def test_lf_after_a_cr_ended_read_is_not_a_blank_line() -> None:
    parser = SseParser()
    assert parser.feed(b"data:a\r") == []
    assert parser.feed(b"\n") == []
    assert parser.feed(b"\r\n") == [msg("a")]


def test_the_event_field_is_kept_as_received_beside_the_dispatched_type() -> None:
    events = SseParser().feed(b"event:\ndata:a\n\nevent:message\ndata:b\n\ndata:c\n\n")
    assert [(e.type, e.event_field, e.relayed_type) for e in events if isinstance(e, SseEvent)] == [
        ("message", "", ""),
        ("message", "message", "message"),
        ("message", None, None),
    ]
    assert SseEvent("tick", "x", "1").relayed_type == "tick"
    assert SseEvent("message", "x", "1", "") == SseEvent("message", "x", "1")


def test_id_is_committed_even_without_dispatch_and_reported_as_id_only() -> None:
    parser = SseParser()
    assert parser.feed(b"id: 42\n") == []
    assert parser.last_event_id == ""
    assert parser.feed(b"\n") == [SseIdOnly("42")]
    assert parser.last_event_id == "42"


def test_close_discards_partial_block_and_keeps_committed_id_and_retry() -> None:
    parser = SseParser()
    parser.feed(b"retry:300\nid:1\ndata:a\n\nid:2\nevent:x\ndata:b\n")
    parser.close()
    assert (parser.last_event_id, parser.retry) == ("1", 300)
    # the next connection's body starts clean: no leftover data, type or id
    assert parser.feed(b"\xef\xbb\xbfdata:c\n\n") == [msg("c", "1")]


def test_close_drops_an_incomplete_utf8_sequence_and_a_pending_cr() -> None:
    parser = SseParser()
    parser.feed(b"data:a\r")
    parser.feed(b"data:\xe2\x80")
    parser.close()
    assert parser.feed(b"\ndata:b\n\n") == [msg("b")]


def test_initial_last_event_id_is_kept_until_a_block_moves_it() -> None:
    parser = SseParser(last_event_id="9")
    assert parser.feed(b"data:a\n\nid:9\n\n") == [msg("a", "9")]
    assert parser.feed(b"id:10\n\n") == [SseIdOnly("10")]


def test_line_longer_than_limit_in_one_read_raises() -> None:
    parser = SseParser(max_event_size=100)
    with pytest.raises(SseParseError, match="exceeds the limit of 100"):
        parser.feed(b":" + b"x" * 100 + b"\n")


def test_line_without_end_growing_over_many_reads_raises() -> None:
    parser = SseParser(max_event_size=1000)
    with pytest.raises(SseParseError, match="longer than 1000 characters"):
        for _ in range(200):
            parser.feed(b"data:xxxx")


def test_line_completed_over_the_limit_raises() -> None:
    parser = SseParser(max_event_size=1000)
    parser.feed(b"data:" + b"x" * 900)
    with pytest.raises(SseParseError):
        parser.feed(b"x" * 200 + b"\n\n")


def test_event_data_over_limit_raises_even_with_short_lines() -> None:
    parser = SseParser(max_event_size=1000)
    with pytest.raises(SseParseError, match="event data exceeds the limit of 1000"):
        parser.feed(b"data:xxxxxxxxx\n" * 101)


def test_many_events_under_limit_do_not_accumulate_toward_it() -> None:
    parser = SseParser(max_event_size=100)
    events: list[Item] = []
    for _ in range(50):
        events += parser.feed(b"data:" + b"x" * 90 + b"\n\n")
    assert len(events) == 50


def test_default_limit_is_one_mebibyte_and_parse_error_is_a_value_error() -> None:
    parser = SseParser()
    parser.feed(b"data:" + b"x" * ((1 << 20) - 10) + b"\n\n")
    with pytest.raises(ValueError):
        parser.feed(b"data:" + b"x" * (1 << 20) + b"\n\n")

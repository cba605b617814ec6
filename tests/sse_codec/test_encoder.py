"""The exact bytes the encoder writes: Zilla's field order and style, and the edge cases."""

from __future__ import annotations

import pytest

from ssegate.sse_codec.encoder import (
    KEEP_ALIVE,
    encode_comment,
    encode_event,
    encode_retry,
    timestamp_line,
)


def test_fields_are_written_in_zillas_order_without_space_after_colon() -> None:
    assert encode_event("a\nb", event="x", id="1") == b"id:1\nevent:x\ndata:a\ndata:b\n\n"


def test_a_timestamp_comes_first_in_lower_case_hex_as_zilla_writes_it() -> None:
    stamped = encode_event("Hello, world", event="one", id="7", timestamp=0x161E350A495)
    assert stamped == b"timestamp:0x161e350a495\nid:7\nevent:one\ndata:Hello, world\n\n"
    assert timestamp_line(0x161E350A495) + encode_event("x", id="7") == encode_event(
        "x", id="7", timestamp=0x161E350A495
    )
    assert encode_event("x", timestamp=0) == b"data:x\n\n"
    assert timestamp_line(0) == b""


def test_data_only_event() -> None:
    assert encode_event("hello") == b"data:hello\n\n"


def test_empty_data_is_a_bare_data_line() -> None:
    assert encode_event("") == b"data:\n\n"
    assert encode_event("", id="7") == b"id:7\ndata:\n\n"


def test_no_data_writes_an_id_only_block() -> None:
    assert encode_event(None, id="X") == b"id:X\n\n"


def test_empty_id_is_written_to_reset_the_readers_id() -> None:
    assert encode_event(None, id="") == b"id:\n\n"


def test_cr_lf_and_crlf_in_data_each_start_a_new_data_line() -> None:
    assert encode_event("a\rb\r\nc\nd") == b"data:a\ndata:b\ndata:c\ndata:d\n\n"


def test_blank_lines_inside_data_become_empty_data_lines() -> None:
    assert encode_event("a\n\nb\n") == b"data:a\ndata:\ndata:b\ndata:\n\n"
    assert encode_event("\r\n") == b"data:\ndata:\n\n"
    assert encode_event("\r\r\n") == b"data:\ndata:\ndata:\n\n"


def test_values_starting_with_a_space_get_one_extra_space() -> None:
    assert encode_event(" a", event=" t", id=" 1") == b"id:  1\nevent:  t\ndata:  a\n\n"
    assert encode_event(" ") == b"data:  \n\n"


def test_every_data_line_starting_with_a_space_gets_one_extra_space() -> None:
    assert encode_event(" a\n b\nc \n  d") == b"data:  a\ndata:  b\ndata:c \ndata:   d\n\n"
    assert encode_event("a\r b") == b"data:a\ndata:  b\n\n"


def test_spaces_not_at_line_start_are_written_as_they_are() -> None:
    assert encode_event("a b\nc d", event="x y") == b"event:x y\ndata:a b\ndata:c d\n\n"


def test_text_is_encoded_as_utf8() -> None:
    assert encode_event("ok…", event="é") == "event:é\ndata:ok…\n\n".encode()


@pytest.mark.parametrize("bad", ["a\nb", "a\rb", "a\r\nb", "\n", "a\x00b"])
def test_id_with_line_break_or_nul_is_rejected(bad: str) -> None:
    with pytest.raises(ValueError, match="id cannot contain"):
        encode_event("x", id=bad)


@pytest.mark.parametrize("bad", ["a\nb", "a\rb", "a\r\nb", "\r"])
def test_event_type_with_line_break_is_rejected(bad: str) -> None:
    with pytest.raises(ValueError, match="event type cannot contain"):
        encode_event("x", event=bad)


def test_nul_is_allowed_in_data_and_event_type() -> None:
    assert encode_event("\x00", event="a\x00") == b"event:a\x00\ndata:\x00\n\n"


def test_keep_alive_is_an_empty_comment() -> None:
    assert encode_comment() == b":\n\n" == KEEP_ALIVE


def test_comment_text_follows_the_colon() -> None:
    assert encode_comment("hi there") == b":hi there\n\n"


def test_multi_line_comment_becomes_one_comment_line_per_line() -> None:
    assert encode_comment("a\nb\r\nc\rd") == b":a\n:b\n:c\n:d\n\n"


def test_retry_is_written_in_milliseconds() -> None:
    assert encode_retry(2000) == b"retry:2000\n\n"
    assert encode_retry(0) == b"retry:0\n\n"


def test_negative_retry_is_rejected() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        encode_retry(-1)

"""The sse-kafka event id codec: Zilla's bytes, the id forms around them, precise refusals."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ssegate.bindings.sse_kafka.event_id import (
    MAX_PARTITIONS,
    EventIdError,
    EventIdFormat,
    ProgressEncoder,
    decode_progress,
    encode_key,
    encode_progress,
    etag_text,
    format_event_id,
    progress_of_last_event_id,
)

progress_maps = st.dictionaries(st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1), max_size=40)


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode()


def test_zillas_worked_examples_encode_exactly() -> None:
    assert encode_progress({0: 2, 1: 1}) == "AQQABAIC"
    assert encode_progress({0: 3, 1: 1}) == "AQQABgIC"


def test_zillas_worked_examples_decode_exactly() -> None:
    assert decode_progress("AQQABAIC") == {0: 2, 1: 1}
    assert decode_progress("AQQABgIC") == {0: 3, 1: 1}


def test_partitions_are_written_in_ascending_order_whatever_the_map_order() -> None:
    assert encode_progress({1: 1, 0: 2}) == "AQQABAIC"


def test_an_empty_progress_is_version_and_zero_count() -> None:
    assert encode_progress({}) == "AQA="
    assert decode_progress("AQA=") == {}


def test_padding_is_kept() -> None:
    token = encode_progress({0: 5})
    assert token == b64(b"\x01\x02\x00\x0a")
    assert token.endswith("=")


def test_large_offsets_use_multi_byte_varints() -> None:
    token = encode_progress({7: 2**40})
    assert decode_progress(token) == {7: 2**40}


@given(progress_maps)
def test_every_progress_round_trips(progress: dict[int, int]) -> None:
    assert decode_progress(encode_progress(progress)) == progress


@given(progress_maps, st.data())
def test_the_incremental_encoder_matches_the_plain_one(
    progress: dict[int, int], data: st.DataObject
) -> None:
    encoder = ProgressEncoder()
    expected: dict[int, int] = {}
    for partition, offset in progress.items():
        encoder.advance(partition, offset)
        expected[partition] = offset
        assert encoder.token() == encode_progress(expected)
    moves = data.draw(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 10**12)), max_size=20))
    for partition, offset in moves:
        encoder.advance(partition, offset)
        expected[partition] = offset
    assert encoder.token() == encode_progress(expected)
    assert encoder.offsets == expected


def test_the_etag_form_appends_slash_etag() -> None:
    assert format_event_id("AQQABAIC", "revision=42", EventIdFormat.ETAG) == "AQQABAIC/revision=42"
    assert format_event_id("AQQABAIC", None, EventIdFormat.ETAG) == "AQQABAIC"


def test_the_key_form_matches_zillas_text() -> None:
    key64 = encode_key(b"key")
    assert key64 == "a2V5"
    assert format_event_id("AQQABAIC", None, EventIdFormat.KEY_AND_ETAG, key64) == (
        '["a2V5","AQQABAIC"]'
    )
    assert format_event_id("AQQABAIC", None, EventIdFormat.KEY_AND_ETAG, None) == (
        '[null,"AQQABAIC"]'
    )
    assert format_event_id("AQQABAIC", "e1", EventIdFormat.KEY_AND_ETAG, key64) == (
        '["a2V5","AQQABAIC/e1"]'
    )


@pytest.mark.parametrize(
    "last_id",
    [
        "AQQABAIC",
        "AQQABAIC/revision=42",
        '["a2V5","AQQABAIC"]',
        '[null,"AQQABAIC"]',
        '["a2V5","AQQABAIC/revision=42"]',
        '[ "a2V5" , "AQQABAIC" ]',
    ],
)
def test_every_id_form_reads_back_to_its_progress(last_id: str) -> None:
    assert progress_of_last_event_id(last_id) == {0: 2, 1: 1}


def test_etags_that_could_not_be_read_back_are_left_out() -> None:
    assert etag_text(b"revision=42") == "revision=42"
    assert etag_text(None) is None
    for bad in (b"a/b", b'a"b', b"a\nb", b"a\x00b", b"\xff"):
        assert etag_text(bad) is None


def varint(value: int) -> bytes:
    zigzag = (value << 1) if value >= 0 else ((-value) << 1) - 1
    out = bytearray()
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


@pytest.mark.parametrize(
    ("last_id", "reason"),
    [
        ("", "empty"),
        ("AQQABAI", "not URL-safe base64"),
        ("AQQA+AIC", "not URL-safe base64"),
        ("AQQA BAI", "not URL-safe base64"),
        ("A===", "not URL-safe base64"),
        ("12345", "not URL-safe base64"),
        (b64(b"\x02\x04\x00\x04\x02\x02"), "unknown event id version 2"),
        (b64(b"\x01\x04\x00\x04\x02"), "partition 1's offset is a truncated varint"),
        (b64(b"\x01\x04\x00\x04\x02\x82"), "partition 1's offset is a truncated varint"),
        (b64(b"\x01\x80"), "the partition count is a truncated varint"),
        (b64(b"\x01\x02\x00\x03"), "partition 0 has the negative offset -2"),
        (b64(b"\x01\x02\x01\x02"), "partition #0 has the negative id -1"),
        (b64(b"\x01\x01"), "negative partition count -1"),
        (b64(b"\x01" + varint(MAX_PARTITIONS + 1)), "more than the limit of 10000"),
        (b64(b"\x01\x04\x00\x04\x00\x02"), "partition 0 is listed twice"),
        (b64(b"\x01\x02\x00\x04\x00"), "1 trailing byte(s)"),
        (b64(b"\x01\x02\x00" + b"\xff" * 10 + b"\x01"), "longer than 10 bytes"),
        (b64(b"\x01\x02\x00" + b"\xfe" * 9 + b"\x7f"), "does not fit 64 bits"),
        (b64(b"\x01\x02" + b"\xfe\xff\xff\xff\x7f" + b"\x00"), "does not fit 32 bits"),
        ('["a2V5","AQQABAIC"', "must end with ']'"),
        ('["a2V5"]', '["<key>","<progress>"]'),
        ('[a2V5,"AQQABAIC"]', "quoted string or null"),
        ('["a2V5",AQQABAIC]', "progress in an id must be a quoted string"),
        ("/etag-only", "empty"),
    ],
)
def test_malformed_ids_are_refused_with_a_precise_reason(last_id: str, reason: str) -> None:
    with pytest.raises(EventIdError) as raised:
        progress_of_last_event_id(last_id)
    assert reason in raised.value.reason


@given(st.text(max_size=60))
def test_any_text_either_decodes_or_raises_event_id_error(text: str) -> None:
    try:
        progress = progress_of_last_event_id(text)
    except EventIdError as exc:
        assert exc.reason
    else:
        assert all(p >= 0 and o >= 0 for p, o in progress.items())


@given(st.binary(max_size=40))
def test_any_bytes_either_decode_or_raise_event_id_error(raw: bytes) -> None:
    try:
        decode_progress(b64(raw))
    except EventIdError as exc:
        assert exc.reason

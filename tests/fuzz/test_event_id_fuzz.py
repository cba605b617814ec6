"""sse-kafka last event ids from a hostile client: progress or ``EventIdError``, nothing else.

``Last-Event-ID`` is whatever a client sends. The ids here are built to get past the first
checks: real progress bytes (version byte, varints) with their counts, ids and offsets out of
range, truncated or trailing, in all three id forms, padded and unpadded, with etags, keys and
stray quotes, brackets and commas. Every one decodes to progress that survives a round trip, or
is refused with a reason.
"""

from __future__ import annotations

import base64

from hypothesis import given
from hypothesis import strategies as st

from ssegate.bindings.sse_kafka.event_id import (
    MAX_PARTITIONS,
    EventIdError,
    decode_progress,
    encode_progress,
    progress_of_last_event_id,
)

from .profiles import FUZZ

VARINT = st.one_of(
    st.integers(0, 0x7F).map(lambda b: bytes([b])),
    st.lists(st.integers(0x80, 0xFF), min_size=1, max_size=11)
    .map(bytes)
    .flatmap(lambda head: st.integers(0, 0x7F).map(lambda last: head + bytes([last]))),
    st.binary(min_size=1, max_size=3),
)
VALID_RAW = st.dictionaries(st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1), max_size=5).map(
    lambda progress: base64.urlsafe_b64decode(encode_progress(progress))
)


def _mutated(raw: bytes, at: int, edit: str, byte: int) -> bytes:
    """``raw`` with one byte replaced, inserted or removed, or cut short, at ``at``."""
    at %= len(raw) + 1
    if edit == "replace" and at < len(raw):
        return raw[:at] + bytes([byte]) + raw[at + 1 :]
    if edit == "insert":
        return raw[:at] + bytes([byte]) + raw[at:]
    if edit == "remove":
        return raw[:at] + raw[at + 1 :]
    return raw[:at]


RAW = st.one_of(
    VALID_RAW,
    st.builds(
        _mutated,
        VALID_RAW,
        st.integers(0, 100),
        st.sampled_from(["replace", "insert", "remove", "cut"]),
        st.integers(0, 255),
    ),
    st.tuples(st.sampled_from([b"\x01", b"\x00", b"\x02"]), st.lists(VARINT, max_size=12)).map(
        lambda parts: parts[0] + b"".join(parts[1])
    ),
    st.binary(max_size=24),
)


def _b64(raw: bytes, padding: str) -> str:
    text = base64.urlsafe_b64encode(raw).decode("ascii")
    return text.rstrip("=") + padding if padding != "keep" else text


TOKENS = st.one_of(
    st.builds(_b64, RAW, st.sampled_from(["keep", "keep", "keep", "", "=", "==", "==="])),
    st.text(alphabet="AQQABAIC-_=+/", max_size=16),
)
ETAGS = st.text(max_size=8) | st.just("")
KEYS = st.sampled_from(["null", '"a2V5"', '""', "a2V5", '"', "nul"]) | st.text(max_size=6)


def _keyed(key: str, token: str, etag: str | None, space: str, close: str) -> str:
    progress = token if etag is None else f"{token}/{etag}"
    return f'[{key},{space}"{progress}"{close}'


IDS = st.one_of(
    TOKENS,
    st.builds(lambda t, e: f"{t}/{e}", TOKENS, ETAGS),
    st.builds(
        _keyed,
        KEYS,
        TOKENS,
        ETAGS | st.none(),
        st.sampled_from(["", " ", "\t"]),
        st.sampled_from(["]", "", ",]", '"]', "] "]),
    ),
    st.text(alphabet='[]",/ =null\tAQIC', max_size=24),
)


@FUZZ
@given(last_event_id=IDS)
def test_any_last_event_id_gives_progress_or_an_event_id_error(last_event_id: str) -> None:
    try:
        progress = progress_of_last_event_id(last_event_id)
    except EventIdError as exc:
        assert exc.reason
        return
    assert len(progress) <= MAX_PARTITIONS
    assert all(0 <= p < 2**31 and 0 <= o < 2**63 for p, o in progress.items())
    assert decode_progress(encode_progress(progress)) == progress

"""The ``traceparent`` header, read strictly (W3C Trace Context, version 00)."""

from __future__ import annotations

import pytest

from ssegate.telemetry.traceparent import MalformedTraceparent, parse_traceparent

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"


def test_a_version_00_header_gives_its_trace_id_parent_id_and_flags() -> None:
    found = parse_traceparent(f"00-{TRACE}-{SPAN}-01".encode())
    assert found.trace_id == bytes.fromhex(TRACE)
    assert found.span_id == bytes.fromhex(SPAN)
    assert found.flags == 1
    assert found.sampled


def test_flags_without_the_sampled_bit_say_the_producer_did_not_sample() -> None:
    assert not parse_traceparent(f"00-{TRACE}-{SPAN}-02".encode()).sampled


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (f"01-{TRACE}-{SPAN}-01", "version b'01' is not 00"),
        (f"ff-{TRACE}-{SPAN}-01", "version b'ff' is not 00"),
        (f"00-{TRACE}-{SPAN}-01-extra", "61 bytes where version 00 has 55"),
        (f"00-{TRACE}-{SPAN}-1", "54 bytes where version 00 has 55"),
        (f"00-{TRACE.upper()}-{SPAN}-01", "fields are not 32, 16 and 2 lowercase hex"),
        (f"00-{TRACE[:-1]}g-{SPAN}-01", "fields are not 32, 16 and 2 lowercase hex"),
        (f"00_{TRACE}-{SPAN}-01", "no version field"),
        (f" 00-{TRACE}-{SPAN}-01"[:55], "no version field"),
        (f"00-{'0' * 32}-{SPAN}-01", "the trace id is all zeros"),
        (f"00-{TRACE}-{'0' * 16}-01", "the parent id is all zeros"),
        ("", "no version field"),
    ],
)
def test_a_malformed_header_is_refused_saying_why(value: str, why: str) -> None:
    with pytest.raises(MalformedTraceparent) as refused:
        parse_traceparent(value.encode())
    assert str(refused.value).startswith(why)

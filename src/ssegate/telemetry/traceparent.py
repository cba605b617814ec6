"""The W3C Trace Context ``traceparent`` header, read strictly: :func:`parse_traceparent`.

A Kafka record whose producer traced it carries the producer's span as a ``traceparent``
header (``00-<trace id>-<parent id>-<flags>``); a delivery trace (:mod:`~.traces`) is then a
child of that span. Only version ``00`` is read, and only in its exact form: 55 characters,
lowercase hex, a 32-digit trace id and a 16-digit parent id that are not all zeros, two flag
digits. Anything else is malformed (:class:`MalformedTraceparent` says why), never guessed at:
a parent that does not exist would hang the delivery under a span nobody can find. The parse is
one ``re.fullmatch``; it runs only for a record a delivery trace considers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HEADER = "traceparent"
"""The record header's name, as W3C Trace Context over Kafka spells it."""

_FORM = re.compile(rb"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_NO_TRACE = b"0" * 32
_NO_SPAN = b"0" * 16
SAMPLED = 0x01
"""The ``sampled`` bit of the flags: the producer recorded its span."""


class MalformedTraceparent(ValueError):
    """A ``traceparent`` that is not a version ``00`` header; the message says what is wrong."""


@dataclass(frozen=True, slots=True)
class TraceParent:
    """A producer's span: the trace it belongs to, its id, its flags."""

    trace_id: bytes
    """16 bytes, not all zeros."""
    span_id: bytes
    """8 bytes, not all zeros: the span the delivery is a child of."""
    flags: int

    @property
    def sampled(self) -> bool:
        return bool(self.flags & SAMPLED)


def parse_traceparent(value: bytes) -> TraceParent:
    """``value`` (a header's bytes) as a :class:`TraceParent`. Raises MalformedTraceparent."""
    found = _FORM.fullmatch(value)
    if found is None:
        raise MalformedTraceparent(_why(value))
    trace_id, span_id, flags = found.groups()
    if trace_id == _NO_TRACE:
        raise MalformedTraceparent("the trace id is all zeros")
    if span_id == _NO_SPAN:
        raise MalformedTraceparent("the parent id is all zeros")
    return TraceParent(
        bytes.fromhex(trace_id.decode()), bytes.fromhex(span_id.decode()), int(flags, 16)
    )


def _why(value: bytes) -> str:
    """What keeps ``value`` from being a version ``00`` traceparent, in a few words."""
    if value[:3] != b"00-":
        return f"version {value[:2]!r} is not 00" if value[2:3] == b"-" else "no version field"
    if len(value) != 55:
        return f"{len(value)} bytes where version 00 has 55"
    return "fields are not 32, 16 and 2 lowercase hex digits separated by '-'"

"""``?since=<time>``: where an sse-kafka stream starts when it asks for a point in time.

An ssegate extension (Zilla has no equivalent). The proxy reads the query parameter ``since``
with :func:`since_of`, asks the broker's time index where that time falls in each partition
(:class:`~ssegate.kafka.times.TopicTimes`) and turns the answer into the same start progress a
last event id gives (:func:`start_of`): the rest of the stream's path is the one a resume takes.

Accepted forms, checked here before the stream starts; anything else raises
:class:`SinceError` with the reason (the proxy answers 400 with it):

- epoch milliseconds, decimal digits only: ``1795860000000``;
- an RFC 3339 date-time with a ``Z`` or ``±hh:mm`` offset and optional fractional seconds:
  ``2026-11-28T10:00:00Z``, ``2026-11-28T10:00:00.250+01:00``. The shape is checked here (the
  standard library's ISO parser alone accepts more: no offset, week dates), the value by
  :meth:`datetime.datetime.fromisoformat`. Fractions below a millisecond round up, so a record
  stamped in the millisecond before the time is not at or after it.

Refused: an empty value, one over :data:`MAX_BYTES` bytes, one given twice, a negative number,
a time before 1970-01-01T00:00:00Z, and one more than :data:`MAX_AHEAD_MS` after now (a value
in microseconds or nanoseconds given for milliseconds lands there). A time in the future up to
that bound is valid and starts at the live end (:attr:`Since.future`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import parse_qsl

from ssegate.kafka.times import PartitionTime

PARAMETER = "since"
MAX_BYTES = 64
MAX_AHEAD_MS = 366 * 24 * 3600 * 1000
"""How far after now a time may be (a year): later ones are refused, not waited for."""

_EPOCH_MS = re.compile(r"-?[0-9]+")
_RFC3339 = re.compile(
    r"(?P<base>[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2})"
    r"(?:\.(?P<fraction>[0-9]{1,9}))?"
    r"(?P<offset>[Zz]|[+-][0-9]{2}:[0-5][0-9])"
)
_EXAMPLES = "epoch milliseconds (1795860000000) or RFC 3339 (2026-11-28T10:00:00Z)"


class SinceError(ValueError):
    """A ``since`` value that cannot start a stream; ``reason`` says exactly why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Since:
    """A valid ``since``: milliseconds since the epoch, and whether it was after now."""

    time_ms: int
    future: bool


def since_of(query: str, now_ms: int) -> Since | None:
    """The ``since`` parameter of a raw query string; ``None`` when it has none."""
    if PARAMETER not in query and "%" not in query:  # most queries: no parsing at all
        return None
    values = [
        value
        for name, value in parse_qsl(query, keep_blank_values=True, errors="replace")
        if name == PARAMETER
    ]
    return parse_since(values, now_ms)


def parse_since(values: Sequence[str], now_ms: int) -> Since | None:
    """The time ``values`` (every value the query gave ``since``) name; raises
    :class:`SinceError`."""
    if not values:
        return None
    if len(values) > 1:
        raise SinceError(f"given {len(values)} times; give it once")
    text = values[0]
    size = len(text.encode("utf-8", "replace"))
    if size > MAX_BYTES:
        raise SinceError(f"is {size} bytes, longer than {MAX_BYTES}")
    if not text:
        raise SinceError(f"is empty; give {_EXAMPLES}")
    if _EPOCH_MS.fullmatch(text):
        time_ms = int(text)
        if time_ms < 0:
            raise SinceError(f"{text} is negative; epoch milliseconds start at 0")
    else:
        time_ms = _rfc3339_ms(text)
    if time_ms > now_ms + MAX_AHEAD_MS:
        raise SinceError(f"{text} is more than a year after now (are these milliseconds?)")
    return Since(time_ms, time_ms > now_ms)


def _rfc3339_ms(text: str) -> int:
    shape = _RFC3339.fullmatch(text)
    if shape is None:
        raise SinceError(f"'{text}' is neither {_EXAMPLES}")
    offset = shape["offset"].upper()
    try:
        moment = datetime.fromisoformat(
            shape["base"].upper() + ("+00:00" if offset == "Z" else offset)
        )
    except ValueError as exc:
        raise SinceError(f"'{text}' is not a valid time: {exc}") from None
    fraction = shape["fraction"] or ""
    sub_ms = math.ceil(int(fraction) * 1000 / 10 ** len(fraction)) if fraction else 0
    time_ms = int(moment.timestamp()) * 1000 + sub_ms
    if time_ms < 0:
        raise SinceError(f"'{text}' is before 1970-01-01T00:00:00Z")
    return time_ms


@dataclass(frozen=True, slots=True)
class SinceStart:
    """A stream's start worked out from where the time falls in each partition."""

    start: dict[int, int]
    """Partition → the next offset to deliver, as a last event id would give it."""
    before_retention: dict[int, int] = field(default_factory=dict)
    """Partition → its earliest offset, where the time falls at or before the oldest record
    left after retention: records now gone may have been at or after it (the stream says so
    with ``event:reset``)."""


def start_of(times: Mapping[int, PartitionTime]) -> SinceStart:
    """The start of every partition in ``times``: its first record at or after the time, or
    its end when none is (the stream is live there at once)."""
    start: dict[int, int] = {}
    before: dict[int, int] = {}
    for partition, where in sorted(times.items()):
        if where.found < 0:
            start[partition] = max(0, where.end)
            continue
        start[partition] = where.found
        if where.found == where.earliest and where.earliest > 0:
            before[partition] = where.earliest
    return SinceStart(start, before)

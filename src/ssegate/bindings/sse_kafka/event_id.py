"""SSE-Kafka event ids: a subscriber's progress across partitions, in Zilla's exact bytes.

Progress maps every partition seen so far to the **next offset to read** (last delivered + 1).
Its bytes are::

    0x01                                   version
    zig-zag LEB128 varint                  partition count
    per partition:
        zig-zag LEB128 varint              partition id
        zig-zag LEB128 varint64            next offset

written as URL-safe base64 *with* ``=`` padding: ``AQQABAIC`` is p0→2, p1→1. Partitions are
written in ascending order (a decoder accepts any order, never a partition twice).

The text the client sees wraps that token in one of two forms, the route's ``with.event.id``:

- ``${etag}`` (the default): ``<progress>`` or, when the message has a Kafka header ``etag``,
  ``<progress>/<etag>``;
- ``["${base64(key)}","${etag}"]``: ``["a2V5","AQQABAIC"]``, ``[null,"AQQABAIC"]`` for a null key.

:func:`progress_of_last_event_id` reads any of these forms back. Everything that cannot be
decoded raises :class:`EventIdError` with the precise reason (the proxy answers 400 with it).
:class:`ProgressEncoder` keeps one subscriber's progress and re-encodes only what changed.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
from collections.abc import Mapping
from enum import Enum

VERSION_1 = 0x01
MAX_PARTITIONS = 10_000
"""A decoded id naming more partitions than this is refused before anything is allocated."""

_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
_BASE64URL = re.compile(r"[A-Za-z0-9_-]*={0,2}")


class EventIdError(ValueError):
    """A last event id that cannot be decoded; ``reason`` says exactly why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class EventIdFormat(Enum):
    """``with.event.id`` of an sse-kafka route."""

    ETAG = "${etag}"
    KEY_AND_ETAG = '["${base64(key)}","${etag}"]'


# -- zig-zag varints ------------------------------------------------------------------------------


def _zigzag(value: int) -> int:
    return (value << 1) if value >= 0 else ((-value) << 1) - 1


def _unzigzag(value: int) -> int:
    return (value >> 1) if not value & 1 else -((value + 1) >> 1)


def _varint(value: int) -> bytes:
    """``value`` zig-zag encoded as an LEB128 varint."""
    encoded = _zigzag(value)
    out = bytearray()
    while encoded >= 0x80:
        out.append((encoded & 0x7F) | 0x80)
        encoded >>= 7
    out.append(encoded)
    return bytes(out)


_shared_varint = functools.lru_cache(maxsize=16384)(_varint)
"""Subscribers at the same point of a topic encode the same offsets: encode each once."""


def _read_varint(data: bytes, at: int, max_bytes: int, what: str) -> tuple[int, int]:
    """The zig-zag varint at ``data[at:]`` and the position after it."""
    result = 0
    shift = 0
    for index in range(at, min(len(data), at + max_bytes)):
        byte = data[index]
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return _unzigzag(result), index + 1
        shift += 7
    if len(data) - at >= max_bytes:
        raise EventIdError(f"{what} is a varint longer than {max_bytes} bytes")
    raise EventIdError(f"{what} is a truncated varint (the id ends inside it)")


# -- progress tokens ------------------------------------------------------------------------------


def encode_progress(progress: Mapping[int, int]) -> str:
    """The base64url progress token for ``progress`` (partition → next offset)."""
    raw = bytearray((VERSION_1,))
    raw += _varint(len(progress))
    for partition in sorted(progress):
        raw += _varint(partition)
        raw += _varint(progress[partition])
    return base64.urlsafe_b64encode(bytes(raw)).decode("ascii")


def decode_progress(text: str) -> dict[int, int]:
    """Partition → next offset from a progress token; raises :class:`EventIdError`."""
    if not text:
        raise EventIdError("the progress token is empty")
    if len(text) % 4 or not _BASE64URL.fullmatch(text):
        raise EventIdError(
            "the progress token is not URL-safe base64 with '=' padding"
            " (A-Z a-z 0-9 - _, length a multiple of 4)"
        )
    try:
        raw = base64.urlsafe_b64decode(text)
    except (binascii.Error, ValueError) as exc:
        raise EventIdError(f"the progress token is not valid base64: {exc}") from None
    if raw[0] != VERSION_1:
        raise EventIdError(f"unknown event id version {raw[0]} (expected {VERSION_1})")
    count, at = _read_varint(raw, 1, 5, "the partition count")
    if count < 0:
        raise EventIdError(f"negative partition count {count}")
    if count > _INT32_MAX:
        raise EventIdError(f"the partition count {count} does not fit 32 bits")
    if count > MAX_PARTITIONS:
        raise EventIdError(f"{count} partitions is more than the limit of {MAX_PARTITIONS}")
    progress: dict[int, int] = {}
    for index in range(count):
        partition, at = _read_varint(raw, at, 5, f"partition #{index}'s id")
        if partition < 0:
            raise EventIdError(f"partition #{index} has the negative id {partition}")
        if partition > _INT32_MAX:
            raise EventIdError(f"partition #{index}'s id {partition} does not fit 32 bits")
        if partition in progress:
            raise EventIdError(f"partition {partition} is listed twice")
        offset, at = _read_varint(raw, at, 10, f"partition {partition}'s offset")
        if offset < 0:
            raise EventIdError(f"partition {partition} has the negative offset {offset}")
        if offset > _INT64_MAX:
            raise EventIdError(f"partition {partition}'s offset {offset} does not fit 64 bits")
        progress[partition] = offset
    if at != len(raw):
        raise EventIdError(f"{len(raw) - at} trailing byte(s) after the last partition")
    return progress


# -- the id text around the token -----------------------------------------------------------------


def encode_key(key: bytes | None) -> str | None:
    """``base64(key)`` as Zilla writes it (URL-safe, padded), ``None`` for a null key."""
    return None if key is None else base64.urlsafe_b64encode(key).decode("ascii")


def format_event_id(
    token: str, etag: str | None, id_format: EventIdFormat, key64: str | None = None
) -> str:
    """The id line's value for a progress ``token``, the message's ``etag`` and key."""
    progress = token if etag is None else f"{token}/{etag}"
    if id_format is EventIdFormat.ETAG:
        return progress
    key_part = "null" if key64 is None else f'"{key64}"'
    return f'[{key_part},"{progress}"]'


def etag_text(value: bytes | None) -> str | None:
    """An ``etag`` header value usable in an id: UTF-8 without CR, LF, NUL, ``"`` or ``/``.

    Anything else is left out of the id (``None``): it could not be read back from it.
    """
    if value is None:
        return None
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if any(c in text for c in '\r\n\0"/'):
        return None
    return text


def progress_token_of(last_event_id: str) -> str:
    """The progress token inside any id form: bare, ``/etag``, or ``[key,"progress[/etag]"]``."""
    text = last_event_id.strip()
    if text.startswith("["):
        if not text.endswith("]"):
            raise EventIdError("an id starting with '[' must end with ']'")
        inner = text[1:-1]
        comma = inner.rfind(",")
        if comma < 0:
            raise EventIdError('an id in the key form must be ["<key>","<progress>"]')
        key_part, progress_part = inner[:comma].strip(), inner[comma + 1 :].strip()
        if key_part != "null" and not (
            len(key_part) >= 2 and key_part[0] == '"' and key_part[-1] == '"'
        ):
            raise EventIdError("the key in an id must be a quoted string or null")
        if not (len(progress_part) >= 2 and progress_part[0] == '"' and progress_part[-1] == '"'):
            raise EventIdError("the progress in an id must be a quoted string")
        text = progress_part[1:-1]
    slash = text.find("/")
    return text if slash < 0 else text[:slash]


def progress_of_last_event_id(last_event_id: str) -> dict[int, int]:
    """Partition → next offset from a client's last event id (any form)."""
    return decode_progress(progress_token_of(last_event_id))


class ProgressEncoder:
    """One subscriber's progress, re-encoding only the partition that moved.

    Each partition keeps its encoded ``id + offset`` varints; :meth:`token` joins them with the
    header and base64-encodes the result, cached until the next move.
    """

    __slots__ = ("_parts", "_token", "offsets")

    def __init__(self, start: Mapping[int, int] | None = None) -> None:
        self.offsets: dict[int, int] = {}
        self._parts: dict[int, bytes] = {}
        self._token: str | None = None
        for partition, offset in (start or {}).items():
            self.advance(partition, offset)

    def advance(self, partition: int, next_offset: int) -> bool:
        """Record ``next_offset`` for ``partition``; ``False`` when nothing changed."""
        if self.offsets.get(partition) == next_offset:
            return False
        if partition not in self.offsets:
            self._parts = dict(sorted({**self._parts, partition: b""}.items()))
        self.offsets[partition] = next_offset
        self._parts[partition] = _shared_varint(partition) + _shared_varint(next_offset)
        self._token = None
        return True

    def token(self) -> str:
        """The progress token for the offsets as they are now."""
        token = self._token
        if token is None:
            raw = b"\x01" + _shared_varint(len(self._parts)) + b"".join(self._parts.values())
            token = self._token = base64.urlsafe_b64encode(raw).decode("ascii")
        return token

"""The datagrams gateway processes exchange about HTTP/1.1 challenge answers (pure, no I/O).

Two kinds, each one JSON object in one datagram, with a version field:

- a **renewal**, sent by the process an answer reached to every other process sharing its
  listening address: the guard's name and the answer's token, as the client sent it. The
  receiver verifies the token with its own guard before it extends anything: a renewal is a
  token to check, never a grant to trust;
- an **outcome**, the receiver's reply to a renewal: how many of its streams the token extended,
  how many of that identity it held, and why none was extended.

:func:`decode` checks everything a hostile sender could get wrong (size, encoding, nesting, the
exact set of fields, their types and lengths) and raises :class:`MalformedDatagram` with a short
reason, which doubles as the label it is counted under; it never raises anything else.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass
from typing import Any

VERSION = 1
MAX_DATAGRAM = 16384
"""Bytes: a datagram longer than this is refused unread (a token is a few hundred bytes)."""
MAX_TOKEN = 12288
MAX_GUARD_NAME = 256
MAX_REASON = 300
MAX_COUNT = 1 << 30

_ID = re.compile(r"[0-9a-f]{32}")
_PRINTABLE = re.compile(r"[\x20-\x7e]*")


class MalformedDatagram(Exception):
    """A datagram that is not one this module writes; ``reason`` is a short label for counting."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Renewal:
    """A challenge answer's token, for the streams another process holds."""

    id: str
    """Random, 32 hex digits: what the outcome answers."""
    guard: str
    token: str


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one process did with a :class:`Renewal`."""

    id: str
    extended: int
    """Streams of this process the token extended."""
    held: int
    """Streams of this process under that guard and identity (HTTP/1.1 ones)."""
    reason: str | None
    """Why none was extended, when ``held`` but not ``extended``."""


Message = Renewal | Outcome


def new_id() -> str:
    return secrets.token_hex(16)


def encode(message: Message) -> bytes:
    if isinstance(message, Renewal):
        fields: dict[str, Any] = {
            "v": VERSION,
            "type": "renewal",
            "id": message.id,
            "guard": message.guard,
            "token": message.token,
        }
    else:
        fields = {
            "v": VERSION,
            "type": "outcome",
            "id": message.id,
            "extended": message.extended,
            "held": message.held,
            "reason": printable(message.reason, MAX_REASON),
        }
    return json.dumps(fields, separators=(",", ":")).encode()


def printable(text: str | None, limit: int) -> str | None:
    """``text`` cut to ``limit`` characters, with all but printable ASCII replaced by ``?``."""
    if text is None:
        return None
    return re.sub(r"[^\x20-\x7e]", "?", text[:limit])


_FIELDS = {
    "renewal": frozenset({"v", "type", "id", "guard", "token"}),
    "outcome": frozenset({"v", "type", "id", "extended", "held", "reason"}),
}


def decode(data: bytes) -> Message:
    """The message ``data`` holds; :class:`MalformedDatagram` for anything else."""
    if len(data) > MAX_DATAGRAM:
        raise MalformedDatagram("oversize")
    try:
        fields = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise MalformedDatagram("not_json") from None
    if not isinstance(fields, dict):
        raise MalformedDatagram("not_an_object")
    version = fields.get("v")
    if type(version) is not int or version != VERSION:
        raise MalformedDatagram("version")
    kind = fields.get("type")
    expected = _FIELDS.get(kind) if isinstance(kind, str) else None
    if expected is None:
        raise MalformedDatagram("type")
    if fields.keys() != expected:
        raise MalformedDatagram("fields")
    id_ = _text(fields, "id", 32)
    if not _ID.fullmatch(id_):
        raise MalformedDatagram("id")
    if kind == "renewal":
        return Renewal(
            id_, _text(fields, "guard", MAX_GUARD_NAME), _text(fields, "token", MAX_TOKEN)
        )
    reason = fields["reason"]
    return Outcome(
        id_,
        _count(fields, "extended"),
        _count(fields, "held"),
        None if reason is None else _text(fields, "reason", MAX_REASON),
    )


def _text(fields: dict[str, Any], name: str, limit: int) -> str:
    value = fields[name]
    if not isinstance(value, str) or not value or len(value) > limit:
        raise MalformedDatagram(name)
    if not _PRINTABLE.fullmatch(value):
        raise MalformedDatagram(name)
    return value


def _count(fields: dict[str, Any], name: str) -> int:
    value = fields[name]
    if type(value) is not int or not 0 <= value <= MAX_COUNT:
        raise MalformedDatagram(name)
    return value

"""The last event id a client resumes from, as the sse server reads it off a request.

The ``last-event-id`` header wins over the ``lastEventId`` query parameter (URL-decoded). The id
is measured in the bytes received — the server edges read header bytes as Latin-1, so each
character of the header is one byte — and then read as UTF-8, an invalid sequence becoming
U+FFFD as a browser's decoder makes it. Two kinds of id are refused with
:class:`BadLastEventId`: one over 254 bytes (as Zilla does: 400 with no body), and one holding
CR, LF or NUL, which no SSE stream can set (a line ends at CR or LF; an ``id`` field with NUL is
ignored), with its reason in the body.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from ssegate.contract.exchange import Request

MAX_LAST_EVENT_ID_BYTES = 254
_NEVER_IN_AN_ID = (b"\r", b"\n", b"\x00")


class BadLastEventId(ValueError):
    """A last event id the sse server answers 400; the reason is logged."""

    status = 400

    def __init__(self, reason: str, *, told: bool = True) -> None:
        super().__init__(reason)
        self.body = f"{reason}\n".encode() if told else b""
        """What the 400 says: nothing for an id over 254 bytes, as in Zilla."""


def last_event_id_of(request: Request) -> str | None:
    """The client's last event id, ``None`` when it sent none; raises :class:`BadLastEventId`."""
    raw = received_last_event_id(request)
    if raw is None:
        return None
    if len(raw) > MAX_LAST_EVENT_ID_BYTES:
        raise BadLastEventId(
            f"last event id is longer than {MAX_LAST_EVENT_ID_BYTES} bytes", told=False
        )
    if any(byte in raw for byte in _NEVER_IN_AN_ID):
        raise BadLastEventId("last event id holds CR, LF or NUL, which no SSE id can")
    return raw.decode("utf-8", "replace")


def received_last_event_id(request: Request) -> bytes | None:
    """The bytes of the ``last-event-id`` header, else of the decoded ``lastEventId``."""
    header = request.headers.get("last-event-id")
    if header is not None:
        return _bytes_of(header)
    if not request.query:
        return None
    for name, value in parse_qsl(request.query, keep_blank_values=True, encoding="latin-1"):
        if name == "lastEventId":
            return _bytes_of(value)
    return None


def _bytes_of(text: str) -> bytes:
    """The bytes behind text the edges read as Latin-1 (text beyond Latin-1 is taken as UTF-8)."""
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode()

"""Turning events into ``text/event-stream`` bytes, the way Zilla writes them.

Every block is written in Zilla's order and style: ``timestamp:`` (only when asked for), ``id:``,
``event:``, the ``data:`` lines, then a blank line, with no space after the colon. A value that
itself starts with a space gets one extra space after the colon, because a reader removes
exactly one (``data:  x`` reads as `` x``).

``data`` may contain CR, LF or CRLF: each of them ends a line, and every line becomes its own
``data:`` line, so a reader gets the lines back joined with LF. ``id`` and ``event`` cannot carry a
line break on the wire (and an ``id`` with NUL is ignored by readers), so such values raise
:class:`ValueError`; callers validate them where they come from. Strings are encoded as UTF-8; a
lone surrogate raises :class:`UnicodeEncodeError`, itself a :class:`ValueError`.

These functions run once per event on the fan-out path and do only C-level string operations.
"""

from __future__ import annotations

KEEP_ALIVE = b":\n\n"
"""The keep-alive comment: an empty comment line and a blank line."""


def _prefixed_lines(prefix: str, text: str) -> str:
    """Every line of ``text`` (split on CR, LF and CRLF) as ``<prefix><line>\\n``.

    ``prefix`` ends with the colon; a line starting with a space gets one more space.
    """
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if " " in text:
        if text[:1] == " ":
            text = " " + text
        text = text.replace("\n ", "\n  ")
    return prefix + text.replace("\n", "\n" + prefix) + "\n"


def encode_event(
    data: str | None, *, event: str | None = None, id: str | None = None, timestamp: int = 0
) -> bytes:
    """One event block: ``id:<id>``, ``event:<event>``, ``data:<line>``…, blank line.

    A ``timestamp`` above 0 (milliseconds since the epoch) comes first, as
    :func:`timestamp_line` writes it, for a client that asked for ``ext=timestamp``.

    ``data=None`` writes no data line: with only an ``id`` that is the id-only block ``id:X\\n\\n``
    which moves a reader's last event id without firing an event. ``data=""`` writes ``data:``, an
    event with empty data. ``id=""`` writes ``id:``, which resets a reader's last event id.

    Raises :class:`ValueError` when ``id`` contains CR, LF or NUL, or ``event`` contains CR or LF.
    """
    out = f"timestamp:0x{timestamp:x}\n" if timestamp > 0 else ""
    if id is not None:
        if "\n" in id or "\r" in id or "\0" in id:
            raise ValueError(f"an SSE id cannot contain CR, LF or NUL: {id!r}")
        out += f"id: {id}\n" if id[:1] == " " else f"id:{id}\n"
    if event is not None:
        if "\n" in event or "\r" in event:
            raise ValueError(f"an SSE event type cannot contain CR or LF: {event!r}")
        out += f"event: {event}\n" if event[:1] == " " else f"event:{event}\n"
    if data is not None:
        if "\n" in data or "\r" in data:
            out += _prefixed_lines("data:", data)
        else:
            out += f"data: {data}\n" if data[:1] == " " else f"data:{data}\n"
    return (out + "\n").encode()


def timestamp_line(timestamp: int) -> bytes:
    """``timestamp:0x<hex>\n``, the line Zilla's ``ext=timestamp`` puts before an event's
    other fields (milliseconds since the epoch, lower-case hex); nothing for 0."""
    return b"timestamp:0x%x\n" % timestamp if timestamp > 0 else b""


def encode_comment(text: str = "") -> bytes:
    """A comment block ``:<text>\\n\\n``; each line of a multi-line ``text`` is its own comment.

    ``encode_comment()`` is the keep-alive ``:\\n\\n`` (:data:`KEEP_ALIVE`). Readers ignore
    comments, so no space handling is needed.
    """
    if "\n" in text or "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\n:")
    return f":{text}\n\n".encode()


def encode_retry(ms: int) -> bytes:
    """``retry:<ms>\\n\\n``: tells a reader how long to wait before reconnecting.

    Raises :class:`ValueError` for a negative value, which readers would ignore.
    """
    if ms < 0:
        raise ValueError(f"an SSE retry must be a non-negative number of milliseconds: {ms}")
    return f"retry:{int(ms)}\n\n".encode()

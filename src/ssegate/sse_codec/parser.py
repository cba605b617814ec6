"""Reading a ``text/event-stream`` body the way a browser does (WHATWG HTML, server-sent events).

:class:`SseParser` is a pure state machine: :meth:`SseParser.feed` takes the bytes of one read
and returns what they completed; it never does I/O and never waits for more bytes to decide.

The rules it follows:

* The body is UTF-8 whatever the headers say; invalid bytes become U+FFFD, and a character
  split across two reads decodes as one. One U+FEFF at the very start of the stream is removed;
  any later one is ordinary text (a second leading BOM spoils the first field name).
* CRLF, LF and a lone CR each end a line. A CR that ends one read ends the line at once, and an
  LF at the start of the next read is then the rest of that CRLF, not a blank line.
* A line starting with ``:`` is a comment. Otherwise the field name runs to the first colon and
  the value is the rest, with one leading space removed; a line without a colon is a field name
  with an empty value. Names are case-sensitive and unknown names are ignored.
* ``data`` appends its value and LF to the data buffer; ``event`` sets the type; ``id`` sets the
  id buffer unless the value contains NUL (an empty value resets it); ``retry`` made only of
  ASCII digits sets :attr:`SseParser.retry` at once, anything else is ignored.
* A blank line ends a block. It commits the id buffer to :attr:`SseParser.last_event_id`, then,
  if any data line was seen, dispatches an :class:`SseEvent` (one trailing LF removed, type
  ``message`` when none was given; the ``event`` field as received is kept beside it, so a
  proxy can write an empty ``event:`` back as it came). The type never carries over to the
  next block.
* A block without data dispatches no event, but its id is still committed. When that moves the
  committed id, :meth:`~SseParser.feed` returns an :class:`SseIdOnly` in the event's place, so a
  proxy can write ``id:X`` + blank line and move its own clients' cursors too.
* :meth:`SseParser.close` ends the stream: a partial block is discarded and its id is not
  committed. The parser is then ready for the body of the next connection: the committed id and
  retry persist, a leading BOM will again be removed.

A line, or the data of one event, longer than ``max_event_size`` decoded characters raises
:class:`SseParseError`; the stream is then unusable and should be dropped.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass, field

DEFAULT_MAX_EVENT_SIZE = 1 << 20
"""1 MiB: the default limit on one line and on the data of one event, in characters."""

_BOM = "\ufeff"


class SseParseError(ValueError):
    """The stream broke a limit that protects the reader's memory."""


@dataclass(frozen=True, slots=True)
class SseEvent:
    """An event dispatched by a blank line after at least one ``data`` line."""

    type: str
    """The ``event`` field, or ``message`` when it was missing or empty."""
    data: str
    """The data lines joined with LF."""
    id: str
    """The last event id at dispatch: the latest ``id`` field, possibly of an earlier block."""
    event_field: str | None = field(default=None, compare=False)
    """The ``event`` field as the block had it (``""`` for ``event:``), ``None`` without one."""

    @property
    def relayed_type(self) -> str | None:
        """The ``event:`` value a proxy writes back: the field as received (an empty one
        stays ``event:``); for an event built without one, its type, none for ``message``."""
        if self.event_field is not None:
            return self.event_field
        return None if self.type == "message" else self.type


@dataclass(frozen=True, slots=True)
class SseIdOnly:
    """A block without data that changed the committed last event id (``id:X`` + blank line)."""

    id: str
    """The newly committed last event id; ``""`` when the block reset it."""


class SseParser:
    """Incremental ``text/event-stream`` parser; see the module docstring for the rules."""

    __slots__ = (
        "_at_stream_start",
        "_data_lines",
        "_data_size",
        "_decoder",
        "_event_type",
        "_id_buffer",
        "_max_size",
        "_partial",
        "_partial_size",
        "_skip_lf",
        "last_event_id",
        "retry",
    )

    def __init__(
        self, *, last_event_id: str = "", max_event_size: int = DEFAULT_MAX_EVENT_SIZE
    ) -> None:
        """``last_event_id`` is the id a reconnecting reader already holds (``""``: none)."""
        self.last_event_id = last_event_id
        """The committed last event id: what a reconnect sends as ``Last-Event-ID``."""
        self.retry: int | None = None
        """The latest valid ``retry`` value in milliseconds, or ``None`` if none was seen."""
        self._max_size = max_event_size
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._reset_stream()

    def _reset_stream(self) -> None:
        self._decoder.reset()
        self._at_stream_start = True
        self._skip_lf = False
        self._partial: list[str] = []
        self._partial_size = 0
        self._data_lines: list[str] = []
        self._data_size = 0
        self._event_type: str | None = None
        self._id_buffer = self.last_event_id

    def close(self) -> None:
        """End of stream: drop the unfinished block (its id is not committed) and pending bytes."""
        self._reset_stream()

    def feed(self, data: bytes) -> list[SseEvent | SseIdOnly]:
        """Parse one read; return the events and id-only commits it completed, in order.

        Raises :class:`SseParseError` when a line or an event's data exceeds the size limit.
        """
        text = self._decoder.decode(data)
        if not text:
            return []
        if self._at_stream_start:
            self._at_stream_start = False
            if text[0] == _BOM:
                text = text[1:]
                if not text:
                    return []
        if self._skip_lf:
            self._skip_lf = False
            if text[0] == "\n":
                text = text[1:]
                if not text:
                    return []
        if "\r" in text:
            if text[-1] == "\r":
                self._skip_lf = True
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if "\n" not in text:
            self._keep_partial(text)
            return []
        lines = text.split("\n")
        tail = lines.pop()
        if self._partial:
            self._partial.append(lines[0])
            lines[0] = "".join(self._partial)
            self._partial.clear()
            self._partial_size = 0
        if len(text) > self._max_size or len(lines[0]) > self._max_size:
            self._check_line_lengths(lines)
        out: list[SseEvent | SseIdOnly] = []
        for line in lines:
            if line:
                self._process_field(line)
            else:
                self._end_block(out)
        if tail:
            self._keep_partial(tail)
        return out

    def _keep_partial(self, text: str) -> None:
        """Buffer the start of a line; a list avoids re-copying a long line on every read."""
        self._partial_size += len(text)
        if self._partial_size > self._max_size:
            raise SseParseError(
                f"event stream line longer than {self._max_size} characters without a line end"
            )
        self._partial.append(text)

    def _check_line_lengths(self, lines: list[str]) -> None:
        for line in lines:
            if len(line) > self._max_size:
                raise SseParseError(
                    f"event stream line of {len(line)} characters exceeds the limit of "
                    f"{self._max_size}"
                )

    def _process_field(self, line: str) -> None:
        colon = line.find(":")
        if colon == 0:
            return  # comment
        if colon < 0:
            name, value = line, ""
        else:
            name = line[:colon]
            value = line[colon + 1 :]
            if value[:1] == " ":
                value = value[1:]
        if name == "data":
            self._data_size += len(value) + 1
            if self._data_size > self._max_size:
                raise SseParseError(
                    f"event stream event data exceeds the limit of {self._max_size} characters"
                )
            self._data_lines.append(value)
        elif name == "event":
            self._event_type = value
        elif name == "id":
            if "\0" not in value:
                self._id_buffer = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self.retry = int(value)

    def _end_block(self, out: list[SseEvent | SseIdOnly]) -> None:
        id_moved = self._id_buffer != self.last_event_id
        self.last_event_id = self._id_buffer
        event_type = self._event_type
        self._event_type = None
        if not self._data_lines:
            if id_moved:
                out.append(SseIdOnly(self._id_buffer))
            return
        data = "\n".join(self._data_lines)
        self._data_lines = []
        self._data_size = 0
        out.append(SseEvent(event_type or "message", data, self._id_buffer, event_type))

"""What is written to a stream whose client reads nothing: kept, not sent (:class:`Hold`).

A stalled client (:mod:`ssegate.bindings.sse.server`: its kernel refused a write, or it is over
the stall mark) already has bytes queued for it in the kernel: sending it more helps it nothing
until it reads again, and costs the gateway a ``send()`` per write and kernel memory per byte.
So its writes are kept in a hold, and sent as one write once it reads again. What a hold keeps
counts toward ``max-buffered``; a stream dropped as slow drops its hold unsent.

Streams written the same bytes (:class:`~ssegate.bindings.sse.fanout.SinkGroup`) share one
:class:`SharedLog`: a write is appended to it once, however many of the group's streams are held,
and each held stream's :class:`LogHold` reads the log from where its hold began. A write to one
such stream alone (a keep-alive, a challenge, its end) first takes the log's part into the
stream's own parts, so its bytes stay in order. The log keeps its entries from the oldest hold
on, and forgets them when that hold ends; it holds references to the writers' bytes, which the
group's streams share, not copies.
"""

from __future__ import annotations

from collections.abc import Callable


class Hold:
    """The bytes written to one held stream, in order, not yet sent."""

    __slots__ = ("_parts", "_size")

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._size = 0

    @property
    def size(self) -> int:
        """Bytes held."""
        return self._size

    def add(self, data: bytes) -> None:
        """``data`` was written to the stream."""
        self._parts.append(data)
        self._size += len(data)

    def take(self) -> bytes:
        """Everything held, as one write; the hold is empty after."""
        data = b"".join(self._parts)
        self._parts = []
        self._size = 0
        return data

    def detach(self) -> None:
        """The stream leaves the group that wrote it: keep what the group held for it."""

    def release(self) -> None:
        """The stream no longer holds: its client reads again, or it closed."""


class LogHold(Hold):
    """A held stream's hold on its group's :class:`SharedLog`: the log from :attr:`start` on,
    then its own parts."""

    __slots__ = ("_log", "_on_release", "start", "start_bytes")

    def __init__(self, log: SharedLog, on_release: Callable[[], None]) -> None:
        super().__init__()
        self._log: SharedLog | None = log
        self._on_release: Callable[[], None] | None = on_release
        self.start = log.end
        """The absolute index in the log of the first entry this hold reads."""
        self.start_bytes = log.appended
        """The log's byte count when this hold began reading it."""

    @property
    def size(self) -> int:
        log = self._log
        return self._size if log is None else self._size + log.appended - self.start_bytes

    def add(self, data: bytes) -> None:
        self._catch_up()
        super().add(data)

    def take(self) -> bytes:
        self._catch_up()
        return super().take()

    def detach(self) -> None:
        self._catch_up()
        self.release()

    def release(self) -> None:
        log, self._log = self._log, None
        if log is not None:
            log.forget(self)
        on_release, self._on_release = self._on_release, None
        if on_release is not None:
            on_release()

    def _catch_up(self) -> None:
        """Move what the log holds for this stream into its own parts."""
        log = self._log
        if log is None:
            return
        entries = log.since(self.start)
        self._parts.extend(entries)
        self._size += log.appended - self.start_bytes
        self.start = log.end
        self.start_bytes = log.appended
        log.moved(self)


class SharedLog:
    """The writes of a group that some of its held streams have not taken yet."""

    __slots__ = ("_entries", "_first", "_holds", "appended")

    def __init__(self) -> None:
        self._entries: list[bytes] = []
        self._first = 0
        """The absolute index of ``_entries[0]``."""
        self._holds: dict[LogHold, None] = {}
        """Holds reading the log, in the order of where they start reading."""
        self.appended = 0
        """Bytes appended while any hold read the log, since the log was made."""

    def __len__(self) -> int:
        """Holds reading the log."""
        return len(self._holds)

    @property
    def end(self) -> int:
        """The absolute index the next entry gets."""
        return self._first + len(self._entries)

    @property
    def entries(self) -> int:
        """Entries kept."""
        return len(self._entries)

    def hold(self, on_release: Callable[[], None]) -> LogHold:
        """A hold reading every write from now on; ``on_release`` is called when it ends."""
        hold = LogHold(self, on_release)
        self._holds[hold] = None
        return hold

    def append(self, data: bytes) -> None:
        """A write of the group: kept for every hold reading the log."""
        if self._holds:
            self._entries.append(data)
            self.appended += len(data)

    def since(self, start: int) -> list[bytes]:
        """The entries from absolute index ``start`` on."""
        return self._entries[start - self._first :]

    def forget(self, hold: LogHold) -> None:
        """``hold`` reads no more: drop the entries no remaining hold reads."""
        if hold not in self._holds:
            return
        del self._holds[hold]
        if not self._holds:
            self._first = self.end
            self._entries = []
        else:  # holds are kept in the order of where they start reading: the first is oldest
            oldest = next(iter(self._holds)).start
            if oldest > self._first:
                del self._entries[: oldest - self._first]
                self._first = oldest

    def moved(self, hold: LogHold) -> None:
        """``hold`` took what it read (it starts at :attr:`end` now): it goes last."""
        if hold in self._holds:
            del self._holds[hold]
            self._holds[hold] = None

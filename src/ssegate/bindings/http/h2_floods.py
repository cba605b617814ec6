"""What one HTTP/2 peer may send that costs work and moves no request forward: frame budgets.

The 2019 HTTP/2 advisories (ping flood CVE-2019-9512, settings flood CVE-2019-9515, empty
frames CVE-2019-9518) and the later rapid reset (CVE-2023-44487) and CONTINUATION flood share one
shape: frames that are each legal and cheap to send but that the server must parse, answer or
account for, sent as fast as a socket carries them. :class:`InboundFrames` reads the frame
headers of the bytes a connection receives, before ``h2`` parses them, and holds each kind to a
budget: a token bucket per kind that refills at the kind's rate per second and holds ``burst``
seconds' worth (a peer may send that many at once after a quiet spell, and the rate on average).
The first frame over its budget ends the scan: the caller hands ``h2`` only the bytes before it
and closes the connection with GOAWAY ``ENHANCE_YOUR_CALM``.

The kinds: ``settings`` and ``ping`` (acknowledgements included), ``empty-data`` (DATA with no
data, padding aside, that does not end its stream), ``rst-stream`` (received, and the refusals a
peer makes the server send by opening streams past the limit, see :meth:`charge`),
``window-update``, ``priority``, ``extension`` (frame types HTTP/2 does not define, which ``h2``
must parse and drop), and ``continuation``: a header block (HEADERS and its CONTINUATION frames)
longer than a header list the server would accept can be, at any rate.

WINDOW_UPDATE frames are owed as well as budgeted: a client may acknowledge every DATA frame the
server sends, once on the stream and once on the connection, so each DATA frame sent earns two
(:attr:`InboundFrames.window_updates_earned`) and only those beyond what was earned spend the
budget. Nothing here does I/O or reads a clock: the caller passes the time.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

SETTINGS = "settings"
PING = "ping"
EMPTY_DATA = "empty-data"
RST_STREAM = "rst-stream"
WINDOW_UPDATE = "window-update"
PRIORITY = "priority"
EXTENSION = "extension"
CONTINUATION = "continuation"
WRITE_BACKLOG = "write-backlog"
"""Not a budget of this module: the connection's own bound on acknowledgements nobody reads."""

PREFACE_LENGTH = 24
"""``PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n``: what a client sends before its first frame."""
FRAME_HEADER_LENGTH = 9
DEFAULT_MAX_FRAME_SIZE = 16384

_END_STREAM = 0x1
_ACK = 0x1
_END_HEADERS = 0x4
_PADDED = 0x8


@dataclass(frozen=True, slots=True)
class FrameBudgets:
    """Frames of each kind one connection may send per second (``options.http2``)."""

    settings: float = 100.0
    ping: float = 100.0
    empty_data: float = 1000.0
    rst_stream: float = 100.0
    window_update: float = 100.0
    """Beyond the two each DATA frame sent earns."""
    priority: float = 100.0
    extension: float = 100.0
    burst: float = 2.0
    """Seconds' worth of each kind that may arrive at once."""

    def rates(self) -> dict[str, float]:
        """Each kind's rate by its config name (``rst-stream``)."""
        return {
            name.replace("_", "-"): rate for name, rate in asdict(self).items() if name != "burst"
        }


@dataclass(frozen=True, slots=True)
class Flood:
    """A frame over its kind's budget, and where it starts in the bytes just scanned."""

    kind: str
    offset: int
    """Bytes of the scanned data before the frame (0 when it began in an earlier read)."""


class _Bucket:
    __slots__ = ("capacity", "rate", "stamp", "tokens")

    def __init__(self, rate: float, burst: float) -> None:
        self.rate = rate
        self.capacity = max(1.0, rate * burst)
        self.tokens = self.capacity
        self.stamp: float | None = None

    def take(self, now: float) -> bool:
        if self.stamp is not None and now > self.stamp:
            self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        return True


class InboundFrames:
    """The frame boundaries of one connection's inbound bytes, and the budgets they spend."""

    __slots__ = (
        "_block",
        "_buckets",
        "_head",
        "_max_block",
        "_max_frame_size",
        "_pad_pending",
        "_skip",
        "acks_owed",
        "window_updates_earned",
    )

    def __init__(
        self,
        budgets: FrameBudgets,
        max_header_bytes: int,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    ) -> None:
        burst = budgets.burst
        self._buckets = {kind: _Bucket(rate, burst) for kind, rate in budgets.rates().items()}
        self._max_frame_size = max_frame_size
        self._max_block = max_header_bytes + max_frame_size
        """A compressed header block is no longer than the header list it carries, so a block
        past the largest list accepted (plus a frame of slack for padding) can only be refused."""
        self._skip = PREFACE_LENGTH
        self._head = b""
        self._pad_pending: int | None = None
        """Length of a padded DATA frame whose pad length (its first byte) is still to come."""
        self._block = -1
        """Bytes of the header block in progress; -1 when none is."""
        self.acks_owed = 0
        """PING and SETTINGS frames of the last scan that ``h2`` will acknowledge."""
        self.window_updates_earned = 0

    def charge(self, kind: str, now: float) -> bool:
        """Spend one frame of ``kind``'s budget; False when there is none left."""
        return self._buckets[kind].take(now)

    def scan(self, data: bytes, now: float) -> Flood | None:
        """Account for the frames that start in ``data``; the first one over budget, if any."""
        self.acks_owed = 0
        pos, end = 0, len(data)
        while pos < end:
            if self._skip:
                step = min(self._skip, end - pos)
                pos += step
                self._skip -= step
                continue
            if self._pad_pending is not None:
                # The header ended the previous read: the frame starts before this one.
                length, self._pad_pending = self._pad_pending, None
                self._skip = length
                if length == data[pos] + 1 and not self.charge(EMPTY_DATA, now):
                    return Flood(EMPTY_DATA, 0)
                continue
            start = pos - len(self._head)
            needed = FRAME_HEADER_LENGTH - len(self._head)
            if end - pos < needed:
                self._head += data[pos:]
                return None
            header = self._head + data[pos : pos + needed] if self._head else data[pos : pos + 9]
            self._head = b""
            pos += needed
            length = int.from_bytes(header[:3], "big")
            kind = self._kind(header[3], header[4], length, data, pos)
            if self._pad_pending is None:
                self._skip = length
            if kind is not None and (kind == CONTINUATION or not self.charge(kind, now)):
                return Flood(kind, max(0, start))
        return None

    def _kind(self, frame_type: int, flags: int, length: int, data: bytes, pos: int) -> str | None:
        """The budget the frame spends (``None``: none), reading its first byte if it must."""
        if frame_type == 0x0:
            if flags & _END_STREAM:
                return None
            if not flags & _PADDED:
                return EMPTY_DATA if length == 0 else None
            if pos < len(data):
                return EMPTY_DATA if length == data[pos] + 1 else None
            self._pad_pending = length
            return None
        if frame_type == 0x1:
            self._block = -1 if flags & _END_HEADERS else length
            return None
        if frame_type == 0x9:
            return self._continued(flags, length)
        if frame_type == 0x4 or frame_type == 0x6:
            if not flags & _ACK:
                self.acks_owed += 1
            return SETTINGS if frame_type == 0x4 else PING
        if frame_type == 0x8:
            if self.window_updates_earned > 0:
                self.window_updates_earned -= 1
                return None
            return WINDOW_UPDATE
        return _CONTROL.get(frame_type, EXTENSION if frame_type > 0x9 else None)

    def _continued(self, flags: int, length: int) -> str | None:
        """A CONTINUATION frame: ``continuation`` once its header block is too long."""
        if self._block < 0 or length > self._max_frame_size:
            return None  # out of place or oversized: h2's connection error to answer
        self._block += length
        too_long = self._block > self._max_block
        if flags & _END_HEADERS:
            self._block = -1
        return CONTINUATION if too_long else None


_CONTROL = {0x2: PRIORITY, 0x3: RST_STREAM}

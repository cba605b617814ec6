"""The downstream side of one shared upstream SSE connection: encode once, write to every sink.

An :class:`UpstreamFanout` holds the downstream streams (:class:`FanoutMember`) that read one
upstream connection. Each upstream item (an event or an id-only block) is encoded once and the
same bytes go to every member through :meth:`SseSink.write_encoded`; the items of one upstream
read are joined into one write. The id is written only when it moved, as a browser relaying the
stream would.

A member is *in step* when its client's last event id is the fanout's: it takes the shared
bytes, through one :class:`~ssegate.bindings.sse.fanout.SinkGroup` for all the in-step members
of an opened fanout (the chunk framed once, one ``send()`` per cleartext HTTP/1.1 socket made
from C, as the sse-kafka broadcasts write). A member that is not in step (it joined without an id
while the fanout's id is set) gets its next items through :meth:`SseSink.event` with the id
written out, and is in step, and in the group, after that.
A member whose client stops reading (:meth:`FanoutMember.pace`, the sse server's backpressure
signal) is written nothing more: it leaves the group with a place in the fanout's
:class:`~ssegate.bindings.sse.upstream_log.UpstreamLog`, and once its client reads again it is
written what it missed, in one write, and placed again. What it is owed counts toward its
stream's ``max-buffered``: past it the stream is dropped as a slow client.
A sink that checks each event (:attr:`SseSink.check`, a ``requests[].content`` model) always
gets its items one by one through :meth:`SseSink.event`, which applies the check, and so does
one whose client asked for ``ext=timestamp``: its events carry the moment they
reached the gateway. An event is relayed with its ``event:`` field as the upstream wrote it
(``event:`` with no type stays so).

:meth:`UpstreamFanout.absorb` moves the members of another fanout of the same upstream request
into this one when both reached the same position, after writing them what they missed.

Everything here is synchronous; the connection, its reconnects and the sharing rules are in
:mod:`ssegate.bindings.sse.client`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from ssegate.bindings.sse.fanout import SinkGroup
from ssegate.bindings.sse.server import DownstreamStream
from ssegate.bindings.sse.source import SseSink
from ssegate.bindings.sse.upstream_log import LogPlace, UpstreamLog
from ssegate.sse_codec.encoder import encode_event
from ssegate.sse_codec.parser import SseEvent, SseIdOnly

UpstreamItem = SseEvent | SseIdOnly


class FanoutMember:
    """One downstream stream reading a shared upstream (the :class:`Subscription` it holds)."""

    __slots__ = ("client_id", "fanout", "in_step", "own_encoding", "sink", "timestamps")

    def __init__(self, fanout: UpstreamFanout, sink: SseSink, client_id: str) -> None:
        self.fanout = fanout
        self.sink = sink
        self.timestamps = sink.timestamps
        self.own_encoding = self.timestamps or sink.check is not None
        """The sink checks each event or wants ``timestamp:`` lines: it never shares bytes."""
        self.client_id = client_id
        """The last event id this downstream's client holds (kept for members not in step)."""
        self.in_step = client_id == fanout.relayed_id and not self.own_encoding

    @property
    def grouped(self) -> bool:
        """Written through the fanout's :class:`SinkGroup` (in step, and the fanout opened)."""
        return self.fanout.writes_as_group(self)

    def cancel(self) -> None:
        self.fanout.remove(self)

    def resume_id(self) -> str | None:
        """Every upstream id is relayed as it comes: a keep-alive has none to add."""
        return None

    def behind_since(self, stalled_since: float, now: float) -> float | None:
        """What it missed is kept for it only up to ``max-buffered``: behind since it stalled."""
        return stalled_since

    def pace(self, stalled: bool) -> None:
        """The client stopped reading: write it nothing until it reads again, then what it
        missed (see the module's doc)."""
        if stalled:
            self.fanout.stop(self)
        else:
            self.fanout.go_on(self)

    def deliver_items(self, items: Sequence[UpstreamItem]) -> None:
        """Send ``items`` one by one with this member's own id bookkeeping (and, for a client
        that asked for timestamps, the moment they reached the gateway)."""
        sink = self.sink
        client_id = self.client_id
        arrived = int(time.time() * 1000) if self.timestamps else 0
        for item in items:
            moved = item.id != client_id
            client_id = item.id
            if isinstance(item, SseEvent):
                sink.event(
                    item.data,
                    event=item.relayed_type,
                    id=item.id if moved else None,
                    timestamp=arrived,
                )
            else:
                sink.event(None, id=item.id)
        self.client_id = client_id
        self.in_step = not self.own_encoding and client_id == self.fanout.relayed_id


class UpstreamFanout:
    """The members of one upstream connection and the position they share."""

    def __init__(self, relayed_id: str, on_empty: Callable[[], None]) -> None:
        self.relayed_id = relayed_id
        """The id of the last item written (the resume id the upstream started with, at first)."""
        self.exact = True
        """True when the last item written set :attr:`relayed_id`, so the position is exact."""
        self.opened = False
        self.closed = False
        self._members: dict[FanoutMember, None] = {}
        self._group: SinkGroup[FanoutMember] = SinkGroup()
        """The in-step members of the opened fanout, written the shared bytes at once."""
        self._apart: dict[FanoutMember, None] = {}
        """The other members, written one by one."""
        self._stopped: dict[FanoutMember, LogPlace] = {}
        """Members whose client reads nothing, and where they left :attr:`_log`. A member in
        none of the three is in the group."""
        self._log: UpstreamLog[UpstreamItem] = UpstreamLog()
        self._on_empty = on_empty

    def __len__(self) -> int:
        return len(self._members)

    @property
    def members(self) -> tuple[FanoutMember, ...]:
        return tuple(self._members)

    # -- membership ---------------------------------------------------------------------------

    def add(self, sink: SseSink, client_id: str) -> FanoutMember:
        member = FanoutMember(self, sink, client_id)
        self._members[member] = None
        self._apart[member] = None
        if self.opened:
            sink.open()
            self._place(member)
        return member

    def remove(self, member: FanoutMember) -> None:
        if member.fanout is not self or member not in self._members:
            return
        del self._members[member]
        place = self._stopped.pop(member, None)
        if place is not None:
            self._log.release(place)
        else:
            self._leave(member)
        if not self._members:
            self._on_empty()

    def absorb(
        self, other: UpstreamFanout, missed: Sequence[UpstreamItem], blocks: Sequence[bytes]
    ) -> None:
        """Take ``other``'s members, which are ``missed`` items behind (``blocks`` encoded)."""
        moved = other.members
        other._members = {}
        for member in moved:
            if member in other._stopped:  # what it missed there waits in its connection
                other._catch_up(member)
            else:
                other._leave(member)
            member.fanout = self
            self._members[member] = None
            self._apart[member] = None
            if missed:
                self._write_to(member, missed, blocks)
            if self.opened:
                self._place(member)
        other._on_empty()

    def writes_as_group(self, member: FanoutMember) -> bool:
        """``member`` is written through the group."""
        return member in self._members and member not in self._apart and member not in self._stopped

    def stop(self, member: FanoutMember) -> None:
        """``member``'s client reads nothing: write it nothing more until :meth:`go_on`."""
        if member in self._members and member not in self._stopped:
            self._leave(member)
            self._stopped[member] = self._log.mark()

    def go_on(self, member: FanoutMember) -> None:
        """``member``'s client reads again: write it what it missed, and place it again."""
        if member in self._stopped:
            self._catch_up(member)
            self._apart[member] = None
            if self.opened and not member.sink.closed:
                self._place(member)

    def _catch_up(self, member: FanoutMember) -> None:
        """Write stopped ``member`` what the log holds for it, and release its place."""
        place = self._stopped.pop(member)
        owed = self._log.since(place)
        self._log.release(place)
        if owed and not member.sink.closed:
            items = [item for entry in owed for item in entry[0]]
            self._write_to(member, items, [entry[1] for entry in owed])

    def _place(self, member: FanoutMember) -> None:
        """Into the group once in step (and the fanout opened), out of it otherwise."""
        grouped = member not in self._apart
        if member.in_step and self.opened and not member.sink.closed:
            if not grouped:
                del self._apart[member]
                self._group.add(member.sink, member)
        elif grouped:
            self._group.discard(member.sink)
            self._apart[member] = None

    def _leave(self, member: FanoutMember) -> None:
        """``member`` is no longer this fanout's: out of the group, or of the members apart."""
        if self._apart.pop(member, False) is False:
            self._group.discard(member.sink)

    # -- delivery -----------------------------------------------------------------------------

    def encode(self, items: Sequence[UpstreamItem]) -> tuple[list[bytes], list[str | None]]:
        """Encode ``items`` once, advancing the position.

        Returns the blocks and, per item, the id it moved to (``None`` when it did not move).
        """
        blocks: list[bytes] = []
        marks: list[str | None] = []
        relayed = self.relayed_id
        moved = False
        for item in items:
            moved = item.id != relayed
            relayed = item.id
            marks.append(relayed if moved else None)
            if isinstance(item, SseEvent):
                blocks.append(
                    encode_event(item.data, event=item.relayed_type, id=relayed if moved else None)
                )
            else:
                blocks.append(encode_event(None, id=relayed))
        if items:
            self.relayed_id = relayed
            self.exact = moved
        return blocks, marks

    def deliver(self, items: Sequence[UpstreamItem]) -> tuple[list[bytes], list[str | None]]:
        """Write ``items`` to every member; returns what :meth:`encode` returned."""
        blocks, marks = self.encode(items)
        if blocks:
            payload = blocks[0] if len(blocks) == 1 else b"".join(blocks)
            if len(self._group):
                self._group.write_encoded(payload)
            for member in list(self._apart):
                if member.in_step:
                    member.sink.write_encoded(payload)
                else:
                    member.deliver_items(items)
                if member in self._apart:  # not removed in the write
                    self._place(member)  # it may be in step now
            if self._stopped:
                self._log.append(items, payload)
                for member, place in list(self._stopped.items()):
                    sink = member.sink
                    if isinstance(sink, DownstreamStream):
                        sink.owed(self._log.owed(place))
        return blocks, marks

    def _write_to(
        self, member: FanoutMember, items: Sequence[UpstreamItem], blocks: Sequence[bytes]
    ) -> None:
        if member.in_step:
            member.sink.write_encoded(b"".join(blocks))
        else:
            member.deliver_items(items)

    # -- the stream's fate, for every member ------------------------------------------------------

    def open(self) -> None:
        self.opened = True
        for member in self.members:
            member.sink.open()
            self._place(member)

    def end(self) -> None:
        self.closed = True
        for member in self.members:
            if member in self._stopped:  # what it missed goes before the end
                self._catch_up(member)
            member.sink.end()

    def fail(self, status: int, reason: str) -> None:
        self.closed = True
        for member in self.members:
            member.sink.fail(status, reason)

"""Many downstream SSE streams written the same bytes at once: :class:`SinkGroup`.

A source that shares one encoding among many streams (the sse-kafka proxy's broadcasts,
:mod:`ssegate.bindings.sse_kafka.broadcast`) writes into a :class:`SinkGroup`, one
:class:`~ssegate.bindings.sse.source.SseSink` standing for all of its members, instead of into
each stream. A write then costs, per member, one pass of a loop over a few attributes, and one
``send()`` made from C:

- The HTTP/1.1 chunk (``<size>\\r\\n<data>\\r\\n``) is framed once for every member.
- A member streaming chunked over cleartext HTTP/1.1 whose connection holds nothing unsent is
  written directly: its descriptor joins one :func:`~ssegate.bindings.tcp.fanout.send_to_all`
  call (:func:`ssegate.native.fanout.send_all`), and what its send did not take goes to its
  transport, behind nothing, so the stream's bytes stay in order.
- A member streaming chunked HTTP/1.1 over TLS is given the framed chunk with one
  ``transport.write``, as its response would write it: its bytes must go through the TLS record
  layer, which lives in the transport and keeps them in order whatever it holds, but they skip
  the stream's and the response's steps.
- Every other member is written as a stream alone, through its own
  :meth:`~ssegate.bindings.sse.server.DownstreamStream.write_encoded`: one whose cleartext
  connection already holds bytes (they go first), an HTTP/2 stream (its DATA frames are made
  per stream, within the stream's and the connection's flow-control windows), an HTTP/1.0 one
  (not chunked), or any sink that is not a
  :class:`~ssegate.bindings.sse.server.DownstreamStream`.
- A member written directly counts as written for the keep-alive and slow-client sweep, as
  :meth:`DownstreamStream.write_encoded` would mark it; the bytes count once per server in
  ``stream.data.sent`` and in ``ssegate.sse.stream.data.direct`` (the part sent past the
  streams: one increment each per group write, not per stream), and in the response's size.
- A member whose direct write left bytes in its transport gets the check a stream makes after
  its own write (:meth:`~ssegate.bindings.sse.server.DownstreamStream.written`): past
  ``max-buffered`` it is dropped (reason ``bytes``); otherwise its kernel refused (it holds its
  low-water mark unsent), so it stalls at once and its source is told: the sse-kafka proxy takes
  it out of the group until its client reads again. A member left in the group while its
  connection holds bytes is written as a stream alone (above), behind them. Every member that
  closed in a write is handed to the group's ``on_dropped`` after it, with the owner it was
  added with.

The group marks a direct member written (:attr:`DownstreamStream.wrote`) and counts its bytes;
everything else about the write is the stream's own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from ssegate.bindings.sse.server import DownstreamStream, SseServer
from ssegate.bindings.sse.source import EventCheck, SseSink
from ssegate.bindings.tcp.fanout import send_to_all
from ssegate.contract.exchange import DirectSocket
from ssegate.sse_codec.encoder import encode_comment, encode_event

Owner = TypeVar("Owner", bound=Hashable)

_Member = tuple[SseSink, Owner, DirectSocket | None, DownstreamStream | None]
"""``(sink, owner, socket, stream)``: ``socket`` is ``None`` for a member never written directly,
``stream`` the sink where it is a :class:`DownstreamStream`."""


def chunk(data: bytes) -> bytes:
    """``data`` framed as one HTTP/1.1 chunk."""
    return b"%x\r\n%b\r\n" % (len(data), data)


class SinkGroup(Generic[Owner]):
    """Streams that get the same bytes, as one :class:`~ssegate.bindings.sse.source.SseSink`.

    Members are open streams of one shape: the same ``timestamps`` and ``check`` (the group's).
    The group is never ``closed``: whoever owns it ends it when its last member leaves.
    """

    def __init__(
        self,
        *,
        timestamps: bool = False,
        check: EventCheck | None = None,
        on_dropped: Callable[[Owner], None] | None = None,
    ) -> None:
        self.timestamps = timestamps
        self.check = check
        self.on_dropped = on_dropped
        self.writes = 0
        """Writes made to every member so far (data, ids, comments)."""
        self.stalled = 0
        """Members the latest write found not reading (they stalled in it)."""
        self._members: dict[SseSink, _Member[Owner]] = {}
        self._servers: dict[SseServer, int] = {}
        """Members by sse server, for the ``stream.data.sent`` count."""

    def __len__(self) -> int:
        return len(self._members)

    def add(self, sink: SseSink, owner: Owner) -> None:
        """``sink`` (open) gets every write from now on; ``owner`` is what ``on_dropped`` is
        told if the sink closes in a write."""
        direct: DirectSocket | None = None
        stream: DownstreamStream | None = None
        if isinstance(sink, DownstreamStream):
            stream = sink
            direct = sink.direct_socket()
            server = sink._server
            self._servers[server] = self._servers.get(server, 0) + 1
        self._members[sink] = (sink, owner, direct, stream)

    def discard(self, sink: SseSink) -> None:
        member = self._members.pop(sink, None)
        if member is not None and isinstance(sink, DownstreamStream):
            server = sink._server
            left = self._servers.get(server, 0) - 1
            if left > 0:
                self._servers[server] = left
            else:
                self._servers.pop(server, None)

    # -- SseSink --------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return False

    def open(self) -> None:
        """Members are open when they join."""

    def write_encoded(self, data: bytes) -> None:
        self.writes += 1
        fds: list[int] = []
        transports: list[asyncio.Transport] = []
        direct: list[_Member[Owner]] = []
        sealed: list[_Member[Owner]] = []
        sealed_transports: list[asyncio.Transport] = []
        alone: list[_Member[Owner]] = []
        size = len(data)
        for member in self._members.values():
            socket = member[2]
            stream = member[3]
            if socket is not None and stream is not None:
                transport = socket.transport
                if transport.is_closing():
                    pass
                elif socket.sealed:
                    sealed.append(member)
                    sealed_transports.append(transport)
                    socket.sent += size
                    stream.wrote = True
                    continue
                elif not transport.get_write_buffer_size():
                    fds.append(socket.fd)
                    transports.append(transport)
                    direct.append(member)
                    socket.sent += size
                    stream.wrote = True
                    continue
            alone.append(member)
        dropped: list[Owner] = []
        stalled = 0
        if direct or sealed:
            framed = chunk(data)
            if direct:
                for index in send_to_all(framed, fds, transports):
                    stalled += self._check_behind(direct[index], dropped)
            for index, transport in enumerate(sealed_transports):
                transport.write(framed)
                if transport.get_write_buffer_size():
                    stalled += self._check_behind(sealed[index], dropped)
            self._count_sent(direct + sealed, size)
        for sink, owner, _, stream in alone:
            was_stalled = stream is not None and stream.stalled
            sink.write_encoded(data)
            if sink.closed:
                dropped.append(owner)
            elif stream is not None and stream.stalled and not was_stalled:
                stalled += 1
        self.stalled = stalled
        on_dropped = self.on_dropped
        if on_dropped is not None:
            for owner in dropped:
                on_dropped(owner)

    def event(
        self,
        data: str | None,
        *,
        event: str | None = None,
        id: str | None = None,
        timestamp: int = 0,
    ) -> None:
        """One event for every member, encoded (and checked) once."""
        check = self.check
        if data is not None and check is not None:
            reason = check(data)
            if reason is not None:
                check.refused(reason, id=id)
                if id is None:
                    return
                data = event = None
        stamp = timestamp if self.timestamps else 0
        self.write_encoded(encode_event(data, event=event, id=id, timestamp=stamp))

    def comment(self, text: str = "") -> None:
        self.write_encoded(encode_comment(text))

    def end(self) -> None:
        for sink in list(self._members):
            sink.end()

    def fail(self, status: int, reason: str) -> None:
        for sink in list(self._members):
            sink.fail(status, reason)

    # -- inside ---------------------------------------------------------------------------------

    @staticmethod
    def _check_behind(member: _Member[Owner], dropped: list[Owner]) -> int:
        """A direct member's transport took what its send left: the stream's own check after a
        write (:meth:`DownstreamStream.written`). 1 when it stalled in it."""
        stream = member[3]
        assert stream is not None
        was_stalled = stream.stalled
        stream.written()
        if stream.closed:
            dropped.append(member[1])
            return 0
        return int(stream.stalled and not was_stalled)

    def _count_sent(self, direct: list[_Member[Owner]], size: int) -> None:
        servers = self._servers
        if len(servers) == 1:
            counts = {next(iter(servers)): len(direct)}
        else:
            counts = {}
            for member in direct:
                stream = member[3]
                assert stream is not None
                counts[stream._server] = counts.get(stream._server, 0) + 1
        for server, count in counts.items():
            server.metrics.inc("stream.data.sent", server.name, size * count)
            server.metrics.inc("ssegate.sse.stream.data.direct", server.name, size * count)

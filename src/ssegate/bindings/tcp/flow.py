"""Flow control of one connection's protocol, and relaying a connection to a protocol chosen later.

asyncio tells a protocol when its transport's write buffer goes over the high-water mark
(``pause_writing``) and when it is back under the low-water mark (``resume_writing``).
:class:`FlowControlledProtocol` keeps that state for the HTTP/1.1 and HTTP/2 protocols and calls
their :meth:`~FlowControlledProtocol.writing_resumed` when writing may go on; it writes only to
an open transport, says how much is still unsent (:attr:`~FlowControlledProtocol.buffered`,
:attr:`~FlowControlledProtocol.unsent`), and pauses and resumes reading at most once each way.

:class:`RelayProtocol` is the protocol of a connection whose real protocol is chosen once it is
open (by the TLS handshake's ALPN, or by the first bytes received): it forwards every event to
the chosen one, and replays a write pause that came before the choice.
"""

from __future__ import annotations

import asyncio
from typing import cast

from ssegate.bindings.tcp import send_queue


def peer_address(transport: asyncio.BaseTransport) -> str:
    """``host:port`` of the peer, or ``""`` where the transport does not say."""
    peer = transport.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return ""


class FlowControlledProtocol(asyncio.Protocol):
    """A connection's protocol that follows its transport's write and read flow control."""

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self._fd = -1
        """The socket under the transport (-1: none), for :attr:`unsent`."""
        self._remote = ""
        self._write_paused = False
        """The transport's write buffer is over its high-water mark."""
        self._read_paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self._transport = cast(asyncio.Transport, transport)
        self._fd = send_queue.socket_fd(transport)
        self._remote = peer_address(transport)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self.writing_resumed()

    def writing_resumed(self) -> None:
        """The write buffer drained below its low-water mark: move on what waited."""

    @property
    def write_paused(self) -> bool:
        """The transport's write buffer is over its high-water mark (until ``resume_writing``)."""
        return self._write_paused

    @property
    def writable(self) -> bool:
        """The transport is there and not closing."""
        transport = self._transport
        return transport is not None and not transport.is_closing()

    def write(self, data: bytes | bytearray) -> None:
        """Write ``data`` unless the transport is gone or closing."""
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.write(data)

    @property
    def buffered(self) -> int:
        """Bytes in the transport's write buffer; 0 once it is closing."""
        transport = self._transport
        if transport is None or transport.is_closing():
            return 0
        return transport.get_write_buffer_size()

    @property
    def unsent(self) -> int:
        """The connection's bytes not sent yet: the transport's buffer and the kernel's queue."""
        transport = self._transport
        if transport is None or transport.is_closing():
            return 0
        return transport.get_write_buffer_size() + send_queue.unsent_on(self._fd)

    def _pause_reading(self) -> None:
        if not self._read_paused and self._transport is not None:
            self._read_paused = True
            self._transport.pause_reading()

    def _resume_reading(self) -> None:
        if self._read_paused:
            self._read_paused = False
            transport = self._transport
            if transport is not None and not transport.is_closing():
                transport.resume_reading()


class RelayProtocol(asyncio.Protocol):
    """Forwards a connection's events to the protocol chosen for it, once it is chosen."""

    def __init__(self) -> None:
        self._inner: asyncio.Protocol | None = None
        self._write_paused = False

    def relay_to(self, inner: asyncio.Protocol, transport: asyncio.BaseTransport) -> None:
        """From now on ``inner`` is the connection's protocol."""
        self._inner = inner
        inner.connection_made(transport)
        if self._write_paused:
            inner.pause_writing()

    def data_received(self, data: bytes) -> None:
        if self._inner is not None:
            self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._inner is not None else None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._inner is not None:
            self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._write_paused = True
        if self._inner is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._inner is not None:
            self._inner.resume_writing()

"""What the kernel still holds for a peer, and how to drop it at once.

A transport's write buffer is only the part of a response the kernel has not taken yet. A peer
that stops reading first fills the kernel's send queue, which grows to megabytes per socket on
its own (``tcp_wmem``), so how far behind a peer is is the transport's buffer plus the kernel's
unsent bytes: :func:`unsent_bytes` asks the kernel for the latter (``SIOCOUTQNSD``, one system
call).

Closing a socket whose send queue the peer never drains does not free it: the kernel keeps the
unsent bytes and the FIN behind them as an orphaned socket until its retries give up, and the
peer never learns that the stream ended. :func:`reset` closes with ``SO_LINGER`` 0 instead:
the kernel drops the queue and sends RST, and the peer's next read fails with
``ECONNRESET``. Over TLS both reach the TCP socket under the TLS layer.

A socket a fan-out writes past its transport gets a low-water mark for its unsent bytes
(:func:`limit_unsent`, ``TCP_NOTSENT_LOWAT``): the kernel then refuses a send (a short write or
``EAGAIN``) once half of :data:`SEND_LOW_WATER` waits unsent for the peer, where it would
otherwise take up to ``tcp_wmem``'s megabytes. A peer that stops reading is so told apart at the
write that finds its receive window shut, not a mark of bytes later; what the kernel refused is
kept in user space, where it is counted without a system call and dropped at once on a reset.
Bytes in flight are not limited: a healthy peer far away is sent as fast as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import socket
import struct
from typing import Protocol, runtime_checkable

from ssegate.contract.conforms import conforms

SIOCOUTQNSD = 0x894B
"""Linux: bytes in a socket's send queue not yet sent (``linux/sockios.h``)."""

SEND_LOW_WATER = 8 * 1024
"""``TCP_NOTSENT_LOWAT`` of a fan-out's sockets: the kernel refuses new bytes once half of it
is unsent (it wakes a writer below ``lowat``, and takes a new segment only below half of it)."""

_LINGER_NOW = struct.pack("ii", 1, 0)
_INT = struct.Struct("i")


@runtime_checkable
class _Socket(Protocol):
    """A transport's ``socket`` extra info: a socket, or asyncio's or uvloop's wrapper of one."""

    def fileno(self) -> int: ...

    def setsockopt(self, level: int, option: int, value: bytes, /) -> None: ...


def _socket(transport: asyncio.BaseTransport) -> _Socket | None:
    sock = transport.get_extra_info("socket")
    return sock if conforms(sock, _Socket) else None


def socket_fd(transport: asyncio.BaseTransport) -> int:
    """``transport``'s socket descriptor, or -1 where it has none. A connection's protocol asks
    once and keeps it: telling a socket apart is dearer than asking the kernel about it."""
    sock = _socket(transport)
    return sock.fileno() if sock is not None else -1


def unsent_on(fd: int) -> int:
    """Bytes written to the kernel for the peer of socket ``fd`` and not sent yet; 0 where it
    cannot tell (no socket, or closed)."""
    if fd < 0:
        return 0
    try:
        answer = fcntl.ioctl(fd, SIOCOUTQNSD, bytes(_INT.size))
    except (OSError, ValueError):
        return 0
    return int(_INT.unpack(answer)[0])


def unsent_bytes(transport: asyncio.BaseTransport) -> int:
    """Bytes written to the kernel for the peer and not sent yet; 0 where it cannot tell."""
    return unsent_on(socket_fd(transport))


def limit_unsent(transport: asyncio.BaseTransport, low_water: int = SEND_LOW_WATER) -> None:
    """Make the kernel refuse bytes for ``transport``'s peer once about ``low_water // 2`` wait
    unsent (``TCP_NOTSENT_LOWAT``); nothing where it has no socket."""
    sock = _socket(transport)
    if sock is not None:
        with contextlib.suppress(OSError, ValueError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NOTSENT_LOWAT, _INT.pack(low_water))


def reset(transport: asyncio.Transport) -> None:
    """Close at once with RST, dropping everything queued for the peer (ours and the kernel's)."""
    sock = _socket(transport)
    if sock is not None:
        with contextlib.suppress(OSError, ValueError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_NOW)
    transport.abort()

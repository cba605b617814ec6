"""What the kernel holds unsent for a peer that reads nothing, with and without the fan-out's
low-water mark. Real loopback TCP connections; the peer connects with a 4 KiB receive buffer."""

from __future__ import annotations

import asyncio
import errno
import socket

from ssegate.bindings.tcp.send_queue import SEND_LOW_WATER, limit_unsent, unsent_on
from ssegate.native.fanout import send_all_python

CHUNK = b"x" * 200


async def taken_until_refused(limited: bool) -> tuple[int, int]:
    """Write 200-byte chunks to a deaf peer until the kernel refuses one; returns the bytes it
    took and what it held unsent then."""
    loop = asyncio.get_running_loop()
    with socket.create_server(("127.0.0.1", 0)) as listener, socket.socket() as deaf:
        listener.setblocking(False)
        deaf.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        connecting = loop.sock_connect(deaf, listener.getsockname())
        (ours, _), _ = await asyncio.gather(loop.sock_accept(listener), connecting)
        with ours:
            transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
            if limited:
                limit_unsent(transport)
            taken = 0
            while taken < 8 << 20:
                [written] = send_all_python(CHUNK, [ours.fileno()])
                if written == -errno.EAGAIN or 0 <= written < len(CHUNK):
                    return taken + max(0, written), unsent_on(ours.fileno())
                taken += written
                await asyncio.sleep(0)  # loopback delivers what fits the peer's window
            raise AssertionError("the kernel never refused")


def test_the_low_water_mark_makes_the_kernel_refuse_after_a_few_kib_unsent() -> None:
    taken, unsent = asyncio.run(taken_until_refused(limited=True))
    # What it took: the peer's receive window, and at most half the mark unsent behind it.
    assert SEND_LOW_WATER // 2 <= unsent <= SEND_LOW_WATER
    assert taken < 64 * 1024


def test_without_it_the_kernel_takes_far_more_for_a_peer_that_reads_nothing() -> None:
    taken, unsent = asyncio.run(taken_until_refused(limited=False))
    assert taken > 64 * 1024 and unsent > 64 * 1024

"""The same bytes to many cleartext TCP connections, past their transports, in one call.

An asyncio transport writes one buffer per call, one system call each: a fan-out of one event
to 10,000 connections costs 10,000 ``transport.write`` calls from Python. :func:`send_to_all`
hands the bytes and every connection's descriptor to :func:`ssegate.native.fanout.send_all`
instead (one call, the sends made from C), and gives each transport only what its send left.

A :class:`~ssegate.contract.exchange.DirectSocket` is what may be written this way: the socket of
a cleartext TCP transport (never one under TLS, whose bytes must go through the TLS record layer
in the transport). Rules, which keep every connection's bytes in order and never write to a
socket not ours:

- A socket is written directly only while its transport holds nothing (``writable``: the write
  buffer empty, libuv's write queue included, which ``get_write_buffer_size`` counts). Its
  bytes then go exactly where ``transport.write`` would have put them.
- A closing transport is never written directly: it may have closed its descriptor already,
  and the kernel may have given that number to a new connection.
- What a send did not take (a short write, ``EAGAIN``) goes to ``transport.write``, queued
  behind nothing, which keeps the order. A send that failed (``EPIPE``, ``ECONNRESET``) gives
  the whole buffer to ``transport.write`` too, so the transport meets the same failure and
  closes the connection as it would have for its own write.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from ssegate.native import fanout
from ssegate.native.fanout import SendAll


def send_to_all(
    data: bytes,
    fds: Sequence[int],
    transports: Sequence[asyncio.Transport],
    send: SendAll | None = None,
) -> list[int]:
    """Write ``data`` to every descriptor of ``fds`` (each the socket of the transport at the
    same index, ``DirectSocket.writable`` now) with one ``send_all`` call, then give each
    transport what its send left. Returns the indexes of the transports that now hold part of
    ``data`` (their connection is behind: its slow-client bound is for the caller to check).
    """
    written = (send or fanout.send_all)(data, fds)
    size = len(data)
    if written.count(size) == len(written):
        return []
    queued: list[int] = []
    for index, taken in enumerate(written):
        if taken == size:
            continue
        transports[index].write(data[taken:] if taken > 0 else data)
        queued.append(index)
    return queued

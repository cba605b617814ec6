"""Writing past the transports: who is written directly, and where what a send left goes."""

from __future__ import annotations

import asyncio
import errno
from typing import cast

from tests.support.fanout_fakes import FakeSocket, FakeTransport, FdWriter

from ssegate.bindings.tcp.fanout import send_to_all
from ssegate.contract.exchange import DirectSocket


def transports(count: int) -> list[asyncio.Transport]:
    return [cast(asyncio.Transport, FakeTransport()) for _ in range(count)]


def test_every_descriptor_goes_in_one_call_and_full_sends_leave_the_transports_empty() -> None:
    writer = FdWriter()
    queued = send_to_all(b"chunk", [3, 4, 5], transports(3), writer)
    assert queued == []
    assert writer.calls == [(b"chunk", [3, 4, 5])]


def test_what_a_short_send_left_goes_to_the_transport_in_order() -> None:
    writer = FdWriter(takes={4: 2})
    held = transports(3)
    queued = send_to_all(b"chunk", [3, 4, 5], held, writer)
    assert queued == [1]
    assert writer.taken[4] + bytes(cast(FakeTransport, held[1]).buffered) == b"chunk"
    assert not cast(FakeTransport, held[0]).buffered


def test_a_full_queue_or_a_failed_send_gives_the_transport_everything() -> None:
    writer = FdWriter(takes={3: -errno.EAGAIN, 5: -errno.EPIPE})
    held = transports(3)
    assert send_to_all(b"chunk", [3, 4, 5], held, writer) == [0, 2]
    assert cast(FakeTransport, held[0]).buffered == b"chunk"
    assert cast(FakeTransport, held[2]).buffered == b"chunk"  # the transport meets the EPIPE


def test_only_an_open_cleartext_transport_holding_nothing_is_written_directly() -> None:
    plain = FakeTransport(extra={"socket": FakeSocket(7)})
    direct = DirectSocket.of(cast(asyncio.Transport, plain))
    assert direct is not None and direct.fd == 7 and direct.writable and not direct.sealed
    plain.buffered += b"x"
    assert not direct.writable
    plain.buffered.clear()
    plain.closing = True
    assert not direct.writable
    assert DirectSocket.of(cast(asyncio.Transport, FakeTransport())) is None


def test_a_tls_transport_is_written_through_never_at_its_socket_and_keeps_order_when_full() -> None:
    tls = FakeTransport(extra={"socket": FakeSocket(8), "ssl_object": object()})
    sealed = DirectSocket.of(cast(asyncio.Transport, tls))
    assert sealed is not None and sealed.sealed and sealed.fd == -1
    tls.buffered += b"held"  # what it holds goes first: the write is the transport's own
    assert sealed.writable
    tls.closing = True
    assert not sealed.writable
    assert DirectSocket.of(cast(asyncio.Transport, tls)) is None

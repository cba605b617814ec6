"""A closed connection is freed by reference counting alone: it leaves no reference cycle.

The collector policy (:mod:`ssegate.host.collector`) freezes what lives long and runs a full
collection only when memory grows, so a cycle among a closed connection's objects would stay
until then: 1,000 clients dropped for not reading kept 10 MiB for good. Each test opens a real
stream, ends it from the client's side or the gateway's, and asserts with the cyclic collector
off that the connection's protocols are gone and no garbage cycle is left.
"""

from __future__ import annotations

import asyncio
import gc
import socket
import ssl
import struct
import weakref
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import pytest

from ssegate.bindings.http.connection import HttpConnectionProtocol
from support.http_certs import CertFiles, client_context, make_self_signed, server_context
from support.http_servers import H2Client, ScriptedHandler, run, serve

REQUEST = b"GET /stream HTTP/1.1\r\nhost: x\r\n\r\n"


@contextmanager
def no_cyclic_collector() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


CONNECTION_MODULES = ("ssegate.", "h2.", "hpack.", "httptools.")
"""Where the types of a connection's objects come from (the loop's own and those of other
tests' leftovers, which may become garbage meanwhile, are not the connection's)."""


def garbage_cycles() -> list[str]:
    """The types of the connection's objects that only the cyclic collector could free now."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        found = sorted({
            type(o).__qualname__ for o in gc.garbage
            if type(o).__module__.startswith(CONNECTION_MODULES)
        })  # fmt: skip
        gc.garbage.clear()
    finally:
        gc.set_debug(0)
    return found


class Server:
    """An http server whose connections are watched through weak references."""

    def __init__(self) -> None:
        self.handler = ScriptedHandler()
        self.connections: list[weakref.ref[HttpConnectionProtocol]] = []

    def factory(self) -> HttpConnectionProtocol:
        connection = HttpConnectionProtocol(self.handler.handle)
        self.connections.append(weakref.ref(connection))
        return connection

    def protocols_alive(self) -> list[str]:
        alive = []
        for ref in self.connections:
            connection = ref()
            if connection is not None:
                alive.append(type(connection).__qualname__)
                if connection.protocol is not None:
                    alive.append(type(connection.protocol).__qualname__)
        return alive

    async def stream_opened(self) -> None:
        await asyncio.wait_for(self.handler.stream_opened.wait(), 5)
        self.handler.streams[0].send_data(b"data: x\n\n")

    def release_streams(self) -> None:
        self.handler.streams.clear()


@asynccontextmanager
async def watched(tls: ssl.SSLContext | None = None) -> AsyncIterator[tuple[Server, int]]:
    server = Server()
    async with serve(server.factory, tls) as port:
        yield server, port


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0.01)


def assert_freed(server: Server) -> None:
    assert server.connections, "no connection was made"
    assert server.protocols_alive() == []
    assert garbage_cycles() == []


def reset(writer: asyncio.StreamWriter) -> None:
    """Close with a reset, as a client that goes away does."""
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    return make_self_signed(tmp_path_factory.mktemp("certs"))


async def http1_stream(
    server: Server, port: int, tls: ssl.SSLContext | None = None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """An HTTP/1.1 event stream, open and written once."""
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=tls, server_hostname="localhost" if tls else None
    )
    writer.write(REQUEST)
    await server.stream_opened()
    return reader, writer


def test_an_http1_stream_the_client_resets_leaves_no_cycle() -> None:
    async def scenario() -> None:
        async with watched() as (server, port):
            reader, writer = await http1_stream(server, port)
            await reader.readuntil(b"data: x\n\n")
            server.release_streams()
            reset(writer)
            await settle()
            assert_freed(server)

    with no_cyclic_collector():
        run(scenario)


def test_an_http1_stream_the_gateway_aborts_leaves_no_cycle() -> None:
    async def scenario() -> None:
        async with watched() as (server, port):
            reader, writer = await http1_stream(server, port)
            server.handler.streams.pop().abort(0)  # what a slow client's drop does
            with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
                await reader.readuntil(b"never")
            writer.close()
            await settle()
            assert_freed(server)

    with no_cyclic_collector():
        run(scenario)


def test_an_h2c_connection_the_client_closes_leaves_no_cycle() -> None:
    async def scenario() -> None:
        async with watched() as (server, port):
            client = await H2Client.connect(port)
            client.request("GET", "/stream")
            await server.stream_opened()
            server.release_streams()
            await client.close()
            await settle()
            assert_freed(server)

    with no_cyclic_collector():
        run(scenario)


@pytest.mark.parametrize("alpn", ["http/1.1", "h2"])
def test_a_tls_connection_the_client_closes_leaves_no_cycle(files: CertFiles, alpn: str) -> None:
    async def scenario() -> None:
        tls = server_context(files, ["h2", "http/1.1"])
        async with watched(tls) as (server, port):
            context = client_context(files, [alpn])
            if alpn == "h2":
                client = await H2Client.connect(port, context)
                client.request("GET", "/stream")
                await server.stream_opened()
                server.release_streams()
                await client.close()
            else:
                reader, writer = await http1_stream(server, port, context)
                await reader.readuntil(b"data: x\n\n")
                server.release_streams()
                writer.transport.abort()
            await settle()
            assert_freed(server)

    with no_cyclic_collector():
        run(scenario)

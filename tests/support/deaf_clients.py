"""Clients that read nothing, for the slow-client tests, and how to see that they were reset.

A deaf client connects to 127.0.0.1 with a 4 KiB receive buffer, sends its request and then
never reads, so what a server writes to it piles up in the server's kernel send queue and then
in the server's own buffers. ``tcp_state`` tells a reset (``TCP_CLOSE``) from a FIN
(``TCP_CLOSE_WAIT``) without reading. ``DeafH2`` is the same over HTTP/2 (cleartext, prior
knowledge) with the ``h2`` state machine, client side, for reading what came once the test
chooses to.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from dataclasses import dataclass

import h2.config
import h2.connection
import h2.events
import h2.settings

TCP_CLOSE, TCP_CLOSE_WAIT = 7, 8
"""``tcpi_state`` of a socket that was reset, and of one that received a FIN."""


def tcp_state(sock: socket.socket) -> int:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]


async def deaf_client(port: int, request: bytes) -> socket.socket:
    """Connect with a 4 KiB receive buffer, send ``request``, and read nothing."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, ("127.0.0.1", port))
    await loop.sock_sendall(sock, request)
    return sock


@dataclass
class DeafH2:
    """An HTTP/2 client that opens one ``GET`` stream and reads nothing until told."""

    sock: socket.socket
    conn: h2.connection.H2Connection
    stream_id: int

    @classmethod
    async def open(cls, port: int, path: str, window: int | None = None) -> DeafH2:
        """``window``: the stream and connection windows to grant (default: 64 KiB each)."""
        config = h2.config.H2Configuration(client_side=True, header_encoding=None)
        conn = h2.connection.H2Connection(config=config)
        conn.initiate_connection()
        if window is not None:
            conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
            conn.increment_flow_control_window(window)
        stream_id = conn.get_next_available_stream_id()
        conn.send_headers(stream_id, _get(path), end_stream=True)
        sock = await deaf_client(port, conn.data_to_send())
        return cls(sock, conn, stream_id)

    def request(self, path: str) -> int:
        """Open another ``GET`` stream on the connection."""
        stream_id = self.conn.get_next_available_stream_id()
        self.conn.send_headers(stream_id, _get(path), end_stream=True)
        self.sock.sendall(self.conn.data_to_send())
        return stream_id

    def read_events(self, within: float = 1.0) -> list[h2.events.Event]:
        """Read what the server sends, acknowledging data, for ``within`` seconds at most:
        until nothing comes for 0.5 s, the connection ends, or the time is up."""
        self.sock.setblocking(True)
        self.sock.settimeout(0.5)
        deadline = time.monotonic() + within
        events: list[h2.events.Event] = []
        with contextlib.suppress(ConnectionResetError, TimeoutError):
            while time.monotonic() < deadline and (data := self.sock.recv(65536)):
                for event in self.conn.receive_data(data):
                    if isinstance(event, h2.events.DataReceived):
                        self.conn.acknowledge_received_data(
                            event.flow_controlled_length, event.stream_id
                        )
                    events.append(event)
                self.sock.sendall(self.conn.data_to_send())
        return events


def _get(path: str) -> list[tuple[str, str]]:
    return [(":method", "GET"), (":scheme", "http"), (":authority", "localhost"), (":path", path)]

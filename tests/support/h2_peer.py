"""An HTTP/2 peer that writes frames as given, for tests of what a hostile client may send.

``RawH2Peer`` connects over TLS (ALPN ``h2``), sends the preface and an empty SETTINGS frame,
and from then on writes whatever bytes it is handed: frames built with ``hyperframe`` (the
``h2`` library's frame layer) and header blocks encoded with ``hpack``, with no state machine
in the way. It reads the server's frames back as ``hyperframe`` frames. ``flood`` writes one
kind of frame in batches until the server answers with GOAWAY or the connection ends.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections import deque
from collections.abc import Callable
from contextlib import suppress

import hpack
from hyperframe.frame import Frame, GoAwayFrame, HeadersFrame, SettingsFrame

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_CLOSED = (ConnectionError, ssl.SSLError, OSError)


def client_context(ca_pem: str) -> ssl.SSLContext:
    """Trust ``ca_pem`` and offer only ``h2``."""
    context = ssl.create_default_context(cafile=ca_pem)
    context.set_alpn_protocols(["h2"])
    return context


class RawH2Peer:
    """One TLS connection speaking HTTP/2 frames as written, and the frames read back."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.encoder = hpack.Encoder()
        self.decoder = hpack.Decoder()
        self.frames: list[Frame] = []
        """Every frame the server sent, in order."""
        self.ended = False
        """The server closed or reset the connection."""
        self._buffer = bytearray()
        self._unchecked: deque[Frame] = deque()

    @classmethod
    async def open(
        cls, port: int, context: ssl.SSLContext, *, receive_buffer: int | None = None
    ) -> RawH2Peer:
        """Connect and send the preface; ``receive_buffer`` shrinks the socket's (SO_RCVBUF)."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if receive_buffer is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        reader, writer = await asyncio.open_connection(
            sock=sock, ssl=context, server_hostname="localhost", limit=1024
        )
        ssl_object = writer.get_extra_info("ssl_object")
        assert ssl_object is not None and ssl_object.selected_alpn_protocol() == "h2"
        peer = cls(reader, writer)
        peer.send(PREFACE + SettingsFrame(0).serialize())
        return peer

    def send(self, data: bytes) -> None:
        self.writer.write(data)

    def request(self, stream_id: int, path: str, *, end_stream: bool = True) -> bytes:
        """A HEADERS frame for ``GET path``; encode in the order the frames are sent."""
        block = self.encoder.encode(
            [(":method", "GET"), (":scheme", "https"), (":authority", "localhost"), (":path", path)]
        )
        flags = ["END_HEADERS", "END_STREAM"] if end_stream else ["END_HEADERS"]
        return HeadersFrame(stream_id, block, flags=flags).serialize()

    async def read_until(
        self, done: Callable[[Frame], bool] | None = None, timeout: float = 5.0
    ) -> Frame | None:
        """Read until a frame satisfies ``done`` (returned) or the connection ends (None)."""
        deadline = time.monotonic() + timeout
        while True:
            self._parse()
            while self._unchecked:
                frame = self._unchecked.popleft()
                if done is not None and done(frame):
                    return frame
            if self.ended:
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the server neither answered nor closed")
            try:
                data = await asyncio.wait_for(self.reader.read(65536), remaining)
            except _CLOSED:
                data = b""
            if not data:
                self.ended = True
            self._buffer += data

    def _parse(self) -> None:
        buffer = self._buffer
        while len(buffer) >= 9:
            frame, length = Frame.parse_frame_header(memoryview(bytes(buffer[:9])))
            if len(buffer) < 9 + length:
                break
            frame.parse_body(memoryview(bytes(buffer[9 : 9 + length])))
            del buffer[: 9 + length]
            if isinstance(frame, HeadersFrame):
                frame.decoded = self.decoder.decode(frame.data)  # type: ignore[attr-defined]
            self.frames.append(frame)
            self._unchecked.append(frame)

    def status(self, stream_id: int) -> str | None:
        """The ``:status`` the server answered on ``stream_id``, if it has."""
        for frame in self.frames:
            if isinstance(frame, HeadersFrame) and frame.stream_id == stream_id:
                return dict(frame.decoded).get(":status")  # type: ignore[attr-defined, no-any-return]
        return None

    def count(self, kind: type[Frame], **where: object) -> int:
        return sum(
            1
            for frame in self.frames
            if isinstance(frame, kind) and all(getattr(frame, k) == v for k, v in where.items())
        )

    async def flood(
        self, unit: Callable[[int], bytes], *, batch: int = 100, limit: int = 200_000
    ) -> GoAwayFrame | None:
        """Write ``unit(0)``, ``unit(1)``, … in batches until GOAWAY or the end; the GOAWAY."""
        answer = asyncio.create_task(self.read_until(lambda f: isinstance(f, GoAwayFrame), 20))
        sent = 0
        while not answer.done() and sent < limit:
            self.send(b"".join(unit(sent + i) for i in range(batch)))
            sent += batch
            try:
                await self.writer.drain()
            except _CLOSED:
                break
            await asyncio.sleep(0)
        goaway = await answer
        return goaway if isinstance(goaway, GoAwayFrame) else None

    async def close(self) -> None:
        self.writer.close()
        with suppress(*_CLOSED):
            await self.writer.wait_closed()

"""HTTP/2 responses: one :class:`H2ResponseStream` per stream, its data held to the peer's
flow-control windows, every frame written through one coalescing flush.

:class:`H2Responder` is the sending half of an HTTP/2 connection
(:class:`~ssegate.bindings.http.h2.H2Protocol` reads the peer's frames and opens the streams). A
response's data waits in a queue on its stream while the peer's window for it, or for the
connection, is shut, and :meth:`~H2Responder.pump` moves it into ``h2`` as far as both windows
and the peer's maximum frame size allow: when a WINDOW_UPDATE or a larger
``SETTINGS_INITIAL_WINDOW_SIZE`` opens them, and when writing resumes (while the transport is
paused nothing moves). A stream is not ``writable`` while data waits in its queue (for a window
or for the transport) or its connection's transport is paused. The connection's socket is not
limited as an HTTP/1.1 event stream's is: a limit costs every HTTP/2 connection about an eighth
more CPU (more, shorter sends), and the peer's windows are HTTP/2's own backpressure; a peer that
grants wide windows and reads nothing is found by the sse server's sweep. One whose data waited
runs its
drain callbacks once all of it has gone, and every stream with nothing queued runs them when
writing resumes. DATA frames of open streams skip the ``h2`` library's per-frame path
(:mod:`ssegate.bindings.http.h2_frames`).

Writes are coalesced: every frame produced while one ``data_received`` is handled goes out in one
``transport.write`` at its end, and frames produced by handlers at other times are written by
one flush per event-loop iteration. A response is abandoned with ``RST_STREAM(NO_ERROR)``, and
one aborted for a client that does not read with ``RST_STREAM(CANCEL)``, which resets the whole
connection too when the connection alone has more unsent than the limit the handler gives. A
connection that ends after a GOAWAY closes without turning it into a reset
(:func:`~ssegate.bindings.http.timer.linger_close`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

import h2.config
import h2.connection
import h2.exceptions
from h2.errors import ErrorCodes

from ssegate.bindings.http.base import HttpProtocolBase, ResponseStreamBase
from ssegate.bindings.http.h2_floods import InboundFrames
from ssegate.bindings.http.h2_frames import append_data_frame
from ssegate.bindings.http.timer import linger_close
from ssegate.bindings.http.types import ConnectionSetup
from ssegate.bindings.tcp import send_queue
from ssegate.contract.exchange import Request

_CONNECTION_SPECIFIC = frozenset(
    {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"}
)


class H2ResponseStream(ResponseStreamBase["H2Responder"]):
    """The response on one HTTP/2 stream; see :class:`ssegate.contract.exchange.ResponseStream`."""

    def __init__(self, connection: H2Responder, stream_id: int, head_only: bool) -> None:
        super().__init__(connection, head_only)
        self.stream_id = stream_id
        self._pending: deque[bytes] = deque()
        self.blocked = False
        """Data waited for a flow-control window: drain callbacks run once it has all gone."""

    def reset(self) -> None:
        if not self._closed:
            self._connection.reset_stream(self, ErrorCodes.NO_ERROR)

    def abort(self, connection_limit: int) -> None:
        if not self._closed:
            self._connection.abort_stream(self, connection_limit)

    # -- written through the connection -------------------------------------------------------

    def _write_head(self, status: int, headers: list[tuple[str, str]], end: bool) -> None:
        block = [(b":status", str(status).encode())]
        for name, value in headers:
            lower = name.lower()
            if lower not in _CONNECTION_SPECIFIC:
                block.append((lower.encode("latin-1"), value.encode("latin-1")))
        self._connection.send_headers(self, block, end)

    def _write_body(self, data: bytes, end: bool) -> None:
        if data:
            self._pending.append(data)
            self.pending_size += len(data)
        self._connection.pump(self)

    # -- called by the connection -------------------------------------------------------------

    def next_chunk(self, window: int) -> tuple[bytes, bool] | None:
        """Up to ``window`` bytes to send and whether they end the stream; None: nothing to do."""
        if not self._pending:
            if self._ended:
                return b"", True
            return None
        if window <= 0:
            self.blocked = True
            return None
        head = self._pending[0]
        if len(head) <= window:
            self._pending.popleft()
        else:
            self._pending[0] = head[window:]
            head = head[:window]
        self.pending_size -= len(head)
        return head, self._ended and not self._pending

    def drained(self) -> None:
        self.blocked = False
        super().drained()

    def close(self) -> None:
        self._pending.clear()
        self.pending_size = 0
        super().close()


class H2Responder(HttpProtocolBase):
    """The sending half of one HTTP/2 connection, server side: its ``h2`` state machine, its
    response streams and the requests still arriving on them, and its writes."""

    def __init__(self, setup: ConnectionSetup) -> None:
        super().__init__(setup, setup.limits.request_timeout)
        config = h2.config.H2Configuration(client_side=False, header_encoding=None)
        self._conn = h2.connection.H2Connection(config=config)
        self._out = bytearray()
        """Frames to write before what ``h2`` has queued since (see :meth:`pump`)."""
        self._streams: dict[int, H2ResponseStream] = {}
        self._requests: dict[int, tuple[Request, bytearray]] = {}
        self._receiving = False
        self._flush_scheduled = False
        self._closed = False
        self._frames = InboundFrames(setup.limits.frames, setup.limits.max_header_bytes)
        self._unread_acks = 0
        """PING and SETTINGS acknowledgements queued since writing was last paused."""

    def writing_resumed(self) -> None:
        self._unread_acks = 0
        for stream in list(self._streams.values()):
            self.pump(stream)
        self._schedule_flush()
        for stream in list(self._streams.values()):
            if not stream.pending_size:
                stream.drained()

    # -- what response streams call -----------------------------------------------------------

    def send_headers(
        self, stream: H2ResponseStream, block: list[tuple[bytes, bytes]], end: bool
    ) -> None:
        try:
            self._conn.send_headers(stream.stream_id, block, end_stream=end)
        except h2.exceptions.H2Error:
            self._forget(stream)
            return
        if end:
            self._forget(stream)
        self._schedule_flush()

    def pump(self, stream: H2ResponseStream) -> None:
        """Move queued data of ``stream`` into h2 as far as the windows allow."""
        if self._write_paused or self._closed or stream.closed:
            return
        sid = stream.stream_id
        try:
            while True:
                window = min(
                    self._conn.local_flow_control_window(sid), self._conn.max_outbound_frame_size
                )
                chunk = stream.next_chunk(window)
                if chunk is None:
                    break
                data, end = chunk
                if data:
                    if end or not append_data_frame(self._conn, sid, data, self._out):
                        self._conn.send_data(sid, data, end_stream=end)
                    # The peer may acknowledge it on the stream and on the connection.
                    self._frames.window_updates_earned += 2
                elif end:
                    self._conn.end_stream(sid)
                if end:
                    self._forget(stream)
                    break
        except h2.exceptions.H2Error:
            self._forget(stream)
        self._schedule_flush()
        if stream.blocked and not stream.pending_size and not stream.closed:
            stream.drained()

    def reset_stream(self, stream: H2ResponseStream, code: ErrorCodes) -> None:
        with contextlib.suppress(h2.exceptions.H2Error):
            self._conn.reset_stream(stream.stream_id, error_code=code)
        self._forget(stream)
        self._schedule_flush()

    def abort_stream(self, stream: H2ResponseStream, connection_limit: int) -> None:
        """``RST_STREAM(CANCEL)``, dropping the stream's queue; the connection is reset too
        (RST, see :func:`~ssegate.bindings.tcp.send_queue.reset`) when more than
        ``connection_limit`` of its bytes are unsent, since those wait behind a peer that
        does not read."""
        self.reset_stream(stream, ErrorCodes.CANCEL)
        transport = self._transport
        if transport is not None and not self._closed and self.unsent > connection_limit:
            self._closed = True
            self._stop_timers()
            send_queue.reset(transport)

    # -- internals ----------------------------------------------------------------------------

    def _pump_all(self) -> None:
        for stream in list(self._streams.values()):
            self.pump(stream)

    def _forget(self, stream: H2ResponseStream) -> None:
        self._streams.pop(stream.stream_id, None)
        self._requests.pop(stream.stream_id, None)
        stream.close()
        if not self._streams and not self._requests:
            self._arm_idle()

    def _schedule_flush(self) -> None:
        if self._receiving or self._flush_scheduled or self._closed:
            return
        self._flush_scheduled = True
        asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._closed:
            return
        data: bytes | bytearray = self._conn.data_to_send()
        if self._out:
            out, self._out = self._out, bytearray()
            out += data
            data = out
        if data:
            self.write(data)

    def _close_transport(self) -> None:
        """Close after a GOAWAY without turning it into a reset (see :func:`linger_close`)."""
        self._closed = True
        self._stop_timers()
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        if not linger_close(transport, self._timer):
            transport.close()

    @property
    def _ending(self) -> bool:
        return self._closed

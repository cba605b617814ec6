"""HTTP/2 on one connection: the ``h2`` state machine in, one :class:`H2ResponseStream` per stream.

A request is dispatched when its stream ends (bodies are small); one that has not ended within
``HttpLimits.request_timeout`` is reset with CANCEL. A stream opened past
``SETTINGS_MAX_CONCURRENT_STREAMS`` is refused with ``RST_STREAM(REFUSED_STREAM)`` and the
connection goes on (RFC 9113 §5.1.2), where ``h2`` alone would end it. Response data waits in a
queue per stream while the peer's flow-control window is closed and moves on when a
WINDOW_UPDATE or a larger ``SETTINGS_INITIAL_WINDOW_SIZE`` opens it; while the transport is
paused nothing moves.

DATA frames of open streams skip the ``h2`` library's per-frame path
(:mod:`ssegate.bindings.http.h2_frames`). Writes are coalesced: every frame produced while one
``data_received`` is handled goes out in one ``transport.write`` at its end, and frames produced
by handlers at other times are written by one flush per event-loop iteration. Connection errors
(``h2`` raises them carrying their error code) send GOAWAY and close; a response is abandoned
with ``RST_STREAM(NO_ERROR)``, and one aborted for a client that does not read with
``RST_STREAM(CANCEL)``, which resets the whole connection too when the connection alone has more
unsent than the limit the handler gives.

What a peer sends is held to the frame budgets of :mod:`ssegate.bindings.http.h2_floods` before
``h2`` sees it: the first frame over its kind's budget ends the connection with GOAWAY
``ENHANCE_YOUR_CALM``, as does a peer that keeps sending PINGs or SETTINGS while it reads nothing
(more than ``max_unread_acks`` acknowledgements queued while writing is paused); each is one
``http.h2.flood`` log line and a count in ``ssegate.http2.floods{kind}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
from h2.errors import ErrorCodes

from ssegate.bindings.http.base import HttpProtocolBase, ResponseStreamBase
from ssegate.bindings.http.h2_floods import RST_STREAM, WRITE_BACKLOG, InboundFrames
from ssegate.bindings.http.h2_frames import append_data_frame
from ssegate.bindings.http.timer import linger_close
from ssegate.bindings.http.types import ConnectionSetup
from ssegate.bindings.tcp import send_queue
from ssegate.contract.exchange import Request
from ssegate.telemetry import log

_CONNECTION_SPECIFIC = frozenset(
    {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"}
)
_DEFAULT_WINDOW = 65535


class _LocalSettings(h2.settings.Settings):
    """The settings sent to the peer, with ``SETTINGS_MAX_CONCURRENT_STREAMS`` left to
    :class:`H2Protocol` to enforce: ``h2`` answers a stream over it with a connection error
    (GOAWAY), where RFC 9113 §5.1.2 asks for a stream error."""

    @property
    def max_concurrent_streams(self) -> int:
        return 2**31

    @max_concurrent_streams.setter
    def max_concurrent_streams(self, value: int) -> None:
        self[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS] = value


class H2ResponseStream(ResponseStreamBase["H2Protocol"]):
    """The response on one HTTP/2 stream; see :class:`ssegate.contract.exchange.ResponseStream`."""

    def __init__(self, connection: H2Protocol, stream_id: int, head_only: bool) -> None:
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


class H2Protocol(HttpProtocolBase):
    """One HTTP/2 connection, server side."""

    def __init__(
        self, setup: ConnectionSetup, *, upgraded: tuple[Request, bytes, bytes] | None = None
    ) -> None:
        super().__init__(setup, setup.limits.request_timeout)
        self._upgraded = upgraded  # Upgrade: h2c: the request (stream 1), body, HTTP2-Settings
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

    # -- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        codes = h2.settings.SettingCodes
        self._conn.local_settings = _LocalSettings(
            client=False,
            initial_values={
                codes.MAX_CONCURRENT_STREAMS: self._limits.max_concurrent_streams,
                codes.INITIAL_WINDOW_SIZE: self._limits.initial_window_size,
                codes.MAX_HEADER_LIST_SIZE: self._limits.max_header_bytes,
            },
        )
        upgraded, self._upgraded = self._upgraded, None
        if upgraded is None:
            self._conn.initiate_connection()
        else:  # stream 1 is the HTTP/1.1 request, already complete
            self._conn.initiate_upgrade_connection(upgraded[2])
        if self._limits.initial_window_size > _DEFAULT_WINDOW:
            self._conn.increment_flow_control_window(
                self._limits.initial_window_size - _DEFAULT_WINDOW
            )
        self._flush()
        self._arm_idle()  # an idle check finds stream 1 open, if there is one
        if upgraded is not None:
            request, body, _ = upgraded
            stream = self._streams[1] = H2ResponseStream(self, 1, request.method == "HEAD")
            self._dispatch(request, body, stream)

    def data_received(self, data: bytes) -> None:
        if self._closed:
            return
        frames = self._frames
        flood = frames.scan(data, time.monotonic())
        if self._write_paused and frames.acks_owed:
            self._unread_acks += frames.acks_owed
            if self._unread_acks > self._limits.max_unread_acks:
                self._abandon()
                return
        if flood is not None:
            data = data[: flood.offset]
        if data and not self._receive(data):
            return
        if flood is not None and not self._closed:
            self._calm_down(flood.kind)

    def _receive(self, data: bytes) -> bool:
        """Hand ``data`` to ``h2`` and handle its events; False when that ended the connection."""
        self._receiving = True
        try:
            for event in self._conn.receive_data(data):
                if self._closed:
                    break
                self._handle(event)
        except h2.exceptions.ProtocolError as exc:
            # h2 has already queued GOAWAY with the error's code.
            log.event("http.h2.protocol_error", remote=self._remote, reason=str(exc))
            self._receiving = False
            self._flush()
            self._close_transport()
            return False
        finally:
            self._receiving = False
        self._flush()
        return True

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._release()
        # h2's connection keeps a table of its own methods (a cycle): emptied, the connection
        # and its streams, header tables and buffers go at once rather than at a full collection.
        self._conn._frame_dispatch_table.clear()
        self._requests.clear()
        streams, self._streams = self._streams, {}
        for stream in streams.values():
            stream.close()

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

    # -- events -------------------------------------------------------------------------------

    def _handle(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.RequestReceived):
            self._request_received(event)
        elif isinstance(event, h2.events.DataReceived):
            self._data_received(event)
        elif isinstance(event, h2.events.StreamEnded):
            self._stream_ended(event.stream_id)
        elif isinstance(event, h2.events.StreamReset):
            self._requests.pop(event.stream_id, None)
            stream = self._streams.get(event.stream_id)
            if stream is not None:
                self._forget(stream)
        elif isinstance(event, h2.events.WindowUpdated):
            if event.stream_id == 0:
                self._pump_all()
            elif event.stream_id in self._streams:
                self.pump(self._streams[event.stream_id])
        elif isinstance(event, h2.events.RemoteSettingsChanged):
            if h2.settings.SettingCodes.INITIAL_WINDOW_SIZE in event.changed_settings:
                self._pump_all()
        elif isinstance(event, h2.events.ConnectionTerminated):
            self._flush()
            self._close_transport()

    def _request_received(self, event: h2.events.RequestReceived) -> None:
        sid = event.stream_id
        if len(self._streams) >= self._limits.max_concurrent_streams:
            self._refuse_stream(sid)
            return
        self._timer.cancel()
        pseudo: dict[bytes, bytes] = {}
        headers: dict[str, str] = {}
        size = 0
        for raw_name, raw_value in event.headers or []:
            size += len(raw_name) + len(raw_value) + 32
            if raw_name.startswith(b":"):
                pseudo[raw_name] = raw_value
                continue
            name = raw_name.decode("latin-1")
            value = raw_value.decode("latin-1")
            if name in headers:
                headers[name] += ("; " if name == "cookie" else ", ") + value
            else:
                headers[name] = value
        method = pseudo.get(b":method", b"GET").decode("latin-1").upper()
        authority = pseudo.get(b":authority", b"").decode("latin-1") or headers.get("host", "")
        request = Request(
            method=method,
            scheme=pseudo.get(b":scheme", self._setup.scheme.encode()).decode("latin-1"),
            authority=authority,
            target=pseudo.get(b":path", b"").decode("latin-1"),
            headers=headers,
            version="2",
            remote=self._remote,
            connection_id=self._setup.connection_id,
        )
        stream = H2ResponseStream(self, sid, head_only=method == "HEAD")
        self._streams[sid] = stream
        if size > self._limits.max_header_bytes:
            self._refuse(stream, 431)
            return
        self._requests[sid] = (request, bytearray())
        if event.stream_ended is None:
            self._deadlines.expect(sid)

    def _data_received(self, event: h2.events.DataReceived) -> None:
        sid = event.stream_id
        self._conn.acknowledge_received_data(event.flow_controlled_length, sid)
        pending = self._requests.get(sid)
        if pending is None:
            return
        body = pending[1]
        body += event.data or b""
        if len(body) > self._limits.max_body_bytes:
            self._refuse(self._streams[sid], 413)

    def _stream_ended(self, sid: int) -> None:
        pending = self._requests.pop(sid, None)
        stream = self._streams.get(sid)
        if pending is None or stream is None:
            return
        request, body = pending
        self._dispatch(request, bytes(body), stream)

    def _refuse(self, stream: H2ResponseStream, status: int) -> None:
        """Answer ``status`` before the request is complete and stop the rest of it."""
        self._requests.pop(stream.stream_id, None)
        block = [(b":status", str(status).encode()), (b"content-length", b"0")]
        try:
            self._conn.send_headers(stream.stream_id, block, end_stream=True)
            self._conn.reset_stream(stream.stream_id, error_code=ErrorCodes.NO_ERROR)
        except h2.exceptions.H2Error:
            pass
        self._forget(stream)

    def _refuse_stream(self, sid: int) -> None:
        """A stream past the concurrency limit: REFUSED_STREAM, and the connection goes on.

        Each refusal is a reset the peer made the server send, so it spends the peer's
        ``rst-stream`` budget like one it sent itself.
        """
        with contextlib.suppress(h2.exceptions.H2Error):
            self._conn.reset_stream(sid, error_code=ErrorCodes.REFUSED_STREAM)
        self._count("ssegate.http2.streams.refused")
        if not self._frames.charge(RST_STREAM, time.monotonic()):
            self._calm_down(RST_STREAM)

    def _request_overdue(self, sid: int) -> None:
        """The request timeout passed since ``sid`` opened: reset it if it has not ended."""
        stream = self._streams.get(sid)
        if self._closed or sid not in self._requests or stream is None:
            return
        log.warning(
            "http.h2.request_timeout",
            binding=self._setup.binding,
            remote=self._remote,
            stream=sid,
            timeout=self._limits.request_timeout,
        )
        self._count("ssegate.http2.requests.timed_out")
        self.reset_stream(stream, ErrorCodes.CANCEL)

    # -- floods -------------------------------------------------------------------------------

    def _calm_down(self, kind: str) -> None:
        """GOAWAY ``ENHANCE_YOUR_CALM`` to a peer over a frame budget, and close."""
        self._report_flood(kind)
        with contextlib.suppress(h2.exceptions.H2Error):
            self._conn.close_connection(error_code=ErrorCodes.ENHANCE_YOUR_CALM)
        self._flush()
        self._close_transport()

    def _abandon(self) -> None:
        """A peer that keeps asking for acknowledgements it does not read: drop the connection
        and everything queued for it, answering nothing more."""
        self._report_flood(WRITE_BACKLOG)
        self._closed = True
        self._stop_timers()
        if self._transport is not None:
            self._transport.abort()

    def _report_flood(self, kind: str) -> None:
        log.warning(
            "http.h2.flood",
            binding=self._setup.binding,
            kind=kind,
            remote=self._remote,
            connection=self._setup.connection_id,
        )
        self._count("ssegate.http2.floods", kind=kind)

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

    def _idle_expired(self) -> None:
        if self._streams or self._requests or self._closed:
            return
        self._conn.close_connection()
        self._flush()
        self._close_transport()

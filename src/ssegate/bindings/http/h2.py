"""HTTP/2 on one connection: the ``h2`` state machine in, one :class:`H2ResponseStream` per stream.

:class:`H2Protocol` reads what the peer sends and opens the streams; the sending half it extends
(:class:`~ssegate.bindings.http.h2_response.H2Responder`) holds response data to the peer's
flow-control windows and coalesces writes, and :mod:`ssegate.bindings.http.h2_settings` the
settings the connection opens with. A request is dispatched when its stream ends (bodies are
small); one that has not ended within ``HttpLimits.request_timeout`` is reset with CANCEL, one
whose header block is over ``HttpLimits.max_header_bytes`` is answered 431 and one whose body is
over ``HttpLimits.max_body_bytes`` 413 (:mod:`ssegate.bindings.http.h2_head`). A stream opened
past ``SETTINGS_MAX_CONCURRENT_STREAMS`` is refused with ``RST_STREAM(REFUSED_STREAM)`` and the
connection goes on (RFC 9113 §5.1.2), where ``h2`` alone would end it. Connection errors (``h2``
raises them carrying their error code) send GOAWAY and close.

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

import h2.events
import h2.exceptions
import h2.settings
from h2.errors import ErrorCodes

from ssegate.bindings.http.h2_floods import RST_STREAM, WRITE_BACKLOG
from ssegate.bindings.http.h2_head import request_of
from ssegate.bindings.http.h2_response import H2Responder, H2ResponseStream
from ssegate.bindings.http.h2_settings import open_connection
from ssegate.bindings.http.types import ConnectionSetup
from ssegate.contract.exchange import Request
from ssegate.telemetry import log


class H2Protocol(H2Responder):
    """One HTTP/2 connection, server side."""

    def __init__(
        self, setup: ConnectionSetup, *, upgraded: tuple[Request, bytes, bytes] | None = None
    ) -> None:
        super().__init__(setup)
        self._upgraded = upgraded  # Upgrade: h2c: the request (stream 1), body, HTTP2-Settings

    # -- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        upgraded, self._upgraded = self._upgraded, None
        open_connection(self._conn, self._limits, None if upgraded is None else upgraded[2])
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
        request, size = request_of(event.headers or [], self._setup, self._remote)
        stream = H2ResponseStream(self, sid, head_only=request.method == "HEAD")
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

    def _idle_expired(self) -> None:
        if self._streams or self._requests or self._closed:
            return
        self._conn.close_connection()
        self._flush()
        self._close_transport()

"""HTTP/1.x responses: each written in turn, framed as its head says, on a connection kept alive.

:class:`Http1Responder` is the answering half of an HTTP/1.x connection
(:class:`~ssegate.bindings.http.h1.Http1Protocol` reads the requests into its queue). Requests
are answered strictly in order, one response at a time: the next waits in the queue until the
response before it has ended, and reading resumes once the queue is short again. A refusal in
the queue is answered, in its turn, as a small text body with ``connection: close``, and the
connection closes without losing it to a reset (:func:`~ssegate.bindings.http.timer.linger_close`).
A connection with nothing in flight closes after the idle timeout.

:class:`Http1ResponseStream` frames one response: a response without ``content-length`` that is
not ended at once is sent chunked (close-delimited for an HTTP/1.0 client), and while it streams
chunked it offers group writes the connection's socket, or over TLS its transport
(:meth:`~Http1ResponseStream.direct_socket`), and limits what the socket holds unsent. Its
``buffered``/``unsent`` are the connection's, and it is ``writable`` while the connection's
transport is not paused (for such a response: holds nothing).
Write backpressure follows the transport
(:class:`~ssegate.bindings.tcp.flow.FlowControlledProtocol`): every ``on_drain`` callback of the
response in flight runs when writing resumes. A response reset closes the connection without
flushing it; an aborted one resets it (RST), dropping the kernel's queue too.
"""

from __future__ import annotations

from dataclasses import dataclass
from http import HTTPStatus

from ssegate.bindings.http.base import HttpProtocolBase, ResponseStreamBase
from ssegate.bindings.http.timer import linger_close
from ssegate.bindings.http.types import ConnectionSetup
from ssegate.bindings.tcp import send_queue
from ssegate.contract.exchange import DirectSocket, Request

# Pipelined requests held before reading pauses.
MAX_QUEUED_REQUESTS = 32
_HEADS_WITHOUT_BODY = frozenset({204, 304})


@dataclass(slots=True)
class Received:
    """A request read whole, waiting for its turn to be answered."""

    request: Request
    body: bytes
    keep_alive: bool


@dataclass(slots=True)
class Refused:
    """A request that could not be read, answered ``status`` in its turn."""

    status: int
    reason: str


def reason_phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def encode_head(status: int, headers: list[tuple[str, str]], version: str = "1.1") -> bytes:
    """The status line and header block of a response."""
    lines = [f"HTTP/{version} {status} {reason_phrase(status)}"]
    lines.extend(f"{name}: {value}" for name, value in headers)
    lines.append("\r\n")
    return "\r\n".join(lines).encode("latin-1")


class Http1ResponseStream(ResponseStreamBase["Http1Responder"]):
    """The response to one HTTP/1.1 request (a
    :class:`~ssegate.contract.exchange.ResponseStream`)."""

    def __init__(self, connection: Http1Responder, request: Request, keep_alive: bool) -> None:
        super().__init__(connection, head_only=request.method == "HEAD")
        self._http10 = request.version == "1.0"
        self.keep_alive = keep_alive
        self._chunked = False
        self._open_ended = False
        self._direct: DirectSocket | None = None

    def reset(self) -> None:
        if not self._closed:
            self.keep_alive = False
            self._connection.abort()

    def abort(self, connection_limit: int) -> None:
        if not self._closed:
            self.keep_alive = False
            self._connection.abort(reset=True)

    @property
    def open_ended(self) -> bool:
        """Streaming a body of no announced length (an event stream) that has not ended."""
        return self._open_ended and not self._ended

    def direct_socket(self) -> DirectSocket | None:
        """Where a group write (:mod:`ssegate.bindings.sse.fanout`) may put this response's
        whole chunks itself while it streams chunked: the connection's socket over cleartext
        TCP, its TLS transport (``sealed``) over TLS. The same one each time, so what was
        written through it adds up. The socket (under the TLS layer too) takes only
        :data:`~ssegate.bindings.tcp.send_queue.SEND_LOW_WATER` unsent from then on, so that a
        send that a client's shut window refuses says so at once, and the transport's
        high-water mark is 0, so that the response's drain callbacks run as soon as what was
        refused has gone out and a write a client that reads nothing refuses leaves the stream
        not ``writable``. (A TLS transport's write buffer, asyncio's and uvloop's alike, is the
        TLS layer's own: it holds bytes once the TCP transport under it is over that one's
        high-water mark.)"""
        transport = self._connection._transport
        if not self._chunked or self._ended or self._closed or transport is None:
            return None
        direct = self._direct
        if direct is None or direct.transport is not transport:
            direct = self._direct = DirectSocket.of(transport)
            if direct is not None:
                send_queue.limit_unsent(transport)
                transport.set_write_buffer_limits(high=0)
        return direct

    # -- written through the connection -------------------------------------------------------

    def _write_head(self, status: int, headers: list[tuple[str, str]], end: bool) -> None:
        names = {name.lower() for name, _ in headers}
        out = [(n, v) for n, v in headers if n.lower() not in ("connection", "transfer-encoding")]
        bodiless = self._head_only or status in _HEADS_WITHOUT_BODY or status < 200
        if end:
            if "content-length" not in names and not bodiless:
                out.append(("content-length", "0"))
        elif "content-length" not in names and not bodiless:
            self._open_ended = True
            if self._http10:
                self.keep_alive = False
            else:
                self._chunked = True
                out.append(("transfer-encoding", "chunked"))
        if not self.keep_alive:
            out.append(("connection", "close"))
        elif self._http10:
            out.append(("connection", "keep-alive"))
        self._connection.write(encode_head(status, out))
        if end:
            self._finish()

    def _write_body(self, data: bytes, end: bool) -> None:
        if data:
            if self._chunked:
                self._connection.write(b"%x\r\n%b\r\n" % (len(data), data))
            else:
                self._connection.write(data)
        if end:
            if self._chunked and not self._head_only:
                self._connection.write(b"0\r\n\r\n")
            self._finish()

    def _finish(self) -> None:
        self.close()
        self._connection.response_ended(self)


class Http1Responder(HttpProtocolBase):
    """The answering half of one HTTP/1.x connection: its queue of requests read, answered
    one at a time, and how the connection ends."""

    def __init__(self, setup: ConnectionSetup, refuse_status: int | None) -> None:
        super().__init__(setup, setup.limits.http1_request_timeout)
        self._refuse_status = refuse_status
        """When set, every request is answered with this status (a listener without h1)."""
        self._queue: list[Received | Refused] = []
        """Requests parsed and not yet answered, oldest first (at most
        :data:`MAX_QUEUED_REQUESTS`; a list: an empty deque takes 760 bytes a connection)."""
        self._current: Http1ResponseStream | None = None
        self._starting = False
        self._failed = False
        self._closing = False

    def writing_resumed(self) -> None:
        if self._current is not None:
            self._current.drained()

    # -- what the response stream calls ------------------------------------------------------

    def abort(self, *, reset: bool = False) -> None:
        """Close without flushing; with ``reset`` the kernel's queue goes too (RST)."""
        self._closing = True
        if self._transport is None:
            return
        if reset:
            send_queue.reset(self._transport)
        else:
            self._transport.abort()

    def response_ended(self, stream: Http1ResponseStream) -> None:
        if stream is not self._current:
            return
        self._current = None
        if not stream.keep_alive or (self._closing and not self._queue):
            self._close()
            return
        self._start_next()

    # -- internals ----------------------------------------------------------------------------

    def _start_next(self) -> None:
        if self._starting:
            return
        self._starting = True
        try:
            while self._current is None and self._queue and self.writable:
                item = self._queue.pop(0)
                if isinstance(item, Refused):
                    self._answer_refusal(item)
                    return
                self._resume_reading_if_short()
                if self._refuse_status is not None:
                    self._answer_refusal(Refused(self._refuse_status, "HTTP/1.1 not offered"))
                    return
                stream = Http1ResponseStream(self, item.request, item.keep_alive)
                self._current = stream
                self._dispatch(item.request, item.body, stream)
            if self._current is None and not self._queue and not self._timer.armed:
                self._arm_idle()
        finally:
            self._starting = False

    def _answer_refusal(self, refusal: Refused) -> None:
        body = f"{refusal.status} {reason_phrase(refusal.status)}: {refusal.reason}\n".encode()
        headers = [
            ("content-type", "text/plain; charset=utf-8"),
            ("content-length", str(len(body))),
            ("connection", "close"),
        ]
        self.write(encode_head(refusal.status, headers) + body)
        self._linger_close()

    def _resume_reading_if_short(self) -> None:
        if not self._failed and len(self._queue) < MAX_QUEUED_REQUESTS // 2:
            self._resume_reading()

    def _close(self) -> None:
        self._closing = True
        self._stop_timers()
        if self._transport is not None:
            self._transport.close()

    def _linger_close(self) -> None:
        """Close after a refusal without losing it to a reset: the peer may still be sending."""
        self._resume_reading()
        self._closing = True
        self._deadlines.cancel()
        transport = self._transport
        if transport is None or not linger_close(transport, self._timer):
            self._close()

    @property
    def _ending(self) -> bool:
        return self._closing

    def _idle_expired(self) -> None:
        if self._current is None and not self._queue:
            self._close()

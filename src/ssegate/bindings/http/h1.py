"""HTTP/1.1 on one connection: ``httptools`` parsing in, :class:`Http1ResponseStream` out.

Requests are answered strictly in order, one response at a time: pipelined requests wait in a
queue (reading pauses when it is long) until the response before them has ended. A request that
cannot be parsed is answered, in its turn, with the status it earned and the connection closes:
400 for a malformed request line or header, or for an HTTP/1.1 request without a ``Host`` header
or any request with more than one (RFC 9112 §3.2), 431 for a head over the header limit, 413 for
a body over the body limit, 505 for an HTTP version other than 1.0 and 1.1. A request whose head
is complete and whose body has not ended within ``HttpLimits.http1_request_timeout`` is answered
408 and the connection closed: one ``http.h1.request_timeout`` log line and a count in
``ssegate.http1.requests.timed_out``.

A request asking for ``Upgrade: h2c`` on a cleartext connection of a server offering h2 is
answered ``101 Switching Protocols`` and the connection goes on as HTTP/2
(:mod:`ssegate.bindings.http.h2c`); other upgrades are answered as plain HTTP/1.1. One whose
``HTTP2-Settings`` hold a value HTTP/2 forbids is answered 400 naming the setting, with no 101:
one ``http.h1.upgrade_refused`` log line and a count in ``ssegate.http1.upgrades.refused``.

A response without ``content-length`` that is not ended at once is sent chunked (close-delimited
for an HTTP/1.0 client). Write backpressure follows the transport
(:class:`~ssegate.bindings.tcp.flow.FlowControlledProtocol`): every ``on_drain`` callback of the
response in flight runs when writing resumes. A keep-alive connection with no request in
flight closes after the idle timeout; a streaming response in flight keeps it busy, however
quiet. A response reset closes the connection without flushing it; an aborted one resets it
(RST), dropping the kernel's queue too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus

import httptools

from ssegate.bindings.http.base import HttpProtocolBase, ResponseStreamBase
from ssegate.bindings.http.h2c import SWITCHING, UpgradeRefused, as_stream_one, h2c_settings
from ssegate.bindings.http.timer import linger_close
from ssegate.bindings.http.types import ConnectionSetup
from ssegate.bindings.tcp import send_queue
from ssegate.contract.exchange import DirectSocket, Request
from ssegate.telemetry import log

SwitchToH2 = Callable[[Request, bytes, bytes, bytes], None]
"""Hand the connection to HTTP/2: the upgraded request, its body, its ``HTTP2-Settings``
(padded base64url) and the bytes that followed the request."""

# Pipelined requests held before reading pauses.
MAX_QUEUED_REQUESTS = 32
_HEADS_WITHOUT_BODY = frozenset({204, 304})
_DETACHED = httptools.HttpRequestParser(object())
"""The parser a closed connection holds instead of its own, which calls the connection back
(a reference cycle); never fed: a closed connection reads nothing."""


class _Rejected(Exception):
    """Raised from a parser callback to stop parsing; the status is kept on the protocol."""


@dataclass(slots=True)
class _Received:
    request: Request
    body: bytes
    keep_alive: bool


@dataclass(slots=True)
class _Refused:
    status: int
    reason: str


@dataclass(slots=True)
class _Upgrading:
    """A request that asked for an upgrade, held out of the queue while its body arrives (the
    parser stops at the end of such a head)."""

    received: _Received
    missing: int
    settings: bytes | None
    """The ``HTTP2-Settings`` of an h2c upgrade this connection may take, else ``None``."""
    body: bytearray = field(default_factory=bytearray)

    def take(self, data: bytes) -> bytes:
        """Keep what of ``data`` belongs to the body; returns the rest."""
        part = data[: self.missing]
        self.body += part
        self.missing -= len(part)
        return data[len(part) :]


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


class Http1ResponseStream(ResponseStreamBase["Http1Protocol"]):
    """The response to one HTTP/1.1 request (a
    :class:`~ssegate.contract.exchange.ResponseStream`)."""

    def __init__(self, connection: Http1Protocol, request: Request, keep_alive: bool) -> None:
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
        """The connection's socket while this response streams chunked over cleartext TCP:
        a group write (:mod:`ssegate.bindings.sse.fanout`) may send it whole chunks itself. The
        same one each time, so what was sent through it adds up. Its kernel takes only
        :data:`~ssegate.bindings.tcp.send_queue.SEND_LOW_WATER` unsent from then on, so that a
        send that a client's shut window refuses says so at once, and its transport's
        high-water mark is 0, so that the response's drain callbacks run as soon as what was
        refused has gone out."""
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


class Http1Protocol(HttpProtocolBase):
    """One HTTP/1.x connection: parses requests, hands them to ``dispatch`` one at a time."""

    def __init__(
        self,
        setup: ConnectionSetup,
        *,
        refuse_status: int | None = None,
        switch_to_h2: SwitchToH2 | None = None,
    ) -> None:
        super().__init__(setup, setup.limits.http1_request_timeout)
        self._switch_to_h2 = switch_to_h2
        """Set on a cleartext connection of a server offering h2: ``Upgrade: h2c`` is taken."""
        self._upgrading: _Upgrading | None = None
        self._refuse_status = refuse_status
        """When set, every request is answered with this status (a listener without h1)."""
        self._parser = httptools.HttpRequestParser(self)
        self._queue: list[_Received | _Refused] = []
        """Requests parsed and not yet answered, oldest first (at most
        :data:`MAX_QUEUED_REQUESTS`; a list: an empty deque takes 760 bytes a connection)."""
        self._current: Http1ResponseStream | None = None
        self._starting = False
        self._failed = False
        self._closing = False
        # The request being parsed.
        self._request_number = 0
        self._url: list[bytes] = []
        self._headers: list[tuple[bytes, bytes]] = []
        self._body = bytearray()
        self._head_bytes = 0
        self._in_head = False
        self._body_open = False
        """Its head is complete and its body is not."""
        self._body_timed = False
        """Its body has a deadline."""
        self._reject_status = 400
        self._reject_reason = "request rejected"

    # -- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._arm_idle()

    def data_received(self, data: bytes) -> None:
        if self._failed or self._closing:
            return
        upgrading = self._upgrading
        if upgrading is not None:
            data = upgrading.take(data)
            if upgrading.missing:
                self._time_body()
                return
            self._upgrading = None
            self._body_open = False
            if self._upgraded(upgrading, data):
                return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade as upgrade:
            self._parser = httptools.HttpRequestParser(self)
            self._upgrade_asked(data[int(upgrade.args[0]) :])
            return
        except httptools.HttpParserCallbackError:
            self._refuse(self._reject_status, self._reject_reason)
            return
        except httptools.HttpParserError as exc:
            message = str(exc)
            if "version" in message.lower() or "PRI" in message:
                self._refuse(505, "HTTP version not supported")
            else:
                self._refuse(400, message or "malformed request")
            return
        if self._in_head:
            # A header still arriving in pieces is not reported by the parser yet.
            self._head_bytes += len(data)
            if self._head_bytes > 2 * self._limits.max_header_bytes:
                self._refuse(431, "request header fields too large")
        elif self._body_open:
            self._time_body()
        self._start_next()

    def eof_received(self) -> bool | None:
        # A client that half-closes after its request still gets its response, where the
        # transport can stay open for writing (not over TLS). An open-ended response (an
        # event stream, chunked) would never finish: there EOF means the client went away.
        busy = self._current is not None or bool(self._queue)
        if self._current is not None and self._current.open_ended:
            return None
        if busy and self._transport is not None and self._transport.can_write_eof():
            self._closing = True
            return True
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self._release()
        self._parser = _DETACHED  # the parser calls this protocol back: a cycle, kept
        self._switch_to_h2 = None
        self._queue.clear()
        current, self._current = self._current, None
        if current is not None:
            current.close()

    def writing_resumed(self) -> None:
        if self._current is not None:
            self._current.drained()

    # -- httptools callbacks ------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._request_number += 1
        self._url.clear()
        self._headers = []
        self._body = bytearray()
        self._head_bytes = 0
        self._in_head = True

    def on_url(self, url: bytes) -> None:
        self._url.append(url)
        self._count_head(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))
        self._count_head(len(name) + len(value) + 4)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._body_open = True
        self._body_timed = False
        self._timer.cancel()
        version = self._parser.get_http_version()
        if version not in ("1.0", "1.1"):
            self._reject(505)
        hosts = 0
        for name, value in self._headers:
            lower = name.lower()
            if lower == b"host":
                hosts += 1
            if lower != b"content-length":
                continue
            if not value.strip().isdigit():
                self._reject(400)
            if int(value) > self._limits.max_body_bytes:
                self._reject(413)
        if hosts > 1:
            self._reject(400, "more than one Host header")
        if hosts == 0 and version == "1.1":
            self._reject(400, "an HTTP/1.1 request needs a Host header")

    def on_body(self, body: bytes) -> None:
        self._body += body
        if len(self._body) > self._limits.max_body_bytes:
            self._reject(413)

    def on_message_complete(self) -> None:
        self._body_open = False
        request = self._build_request()
        self._queue.append(_Received(request, bytes(self._body), self._parser.should_keep_alive()))
        self._body = bytearray()
        if len(self._queue) >= MAX_QUEUED_REQUESTS:
            self._pause_reading()

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

    # -- upgrades -----------------------------------------------------------------------------

    def _upgrade_asked(self, rest: bytes) -> None:
        """The parser stopped after the head of a request asking for an upgrade (``rest``
        follows it): read its body, then switch to HTTP/2 (h2c) or answer it as HTTP/1.1 and
        parse what follows as the next request. Other upgrades (websocket) are not offered."""
        received = self._queue.pop() if self._queue else None
        if not isinstance(received, _Received):
            self._refuse(400, "malformed upgrade request")
            return
        length = 0
        for name, value in self._headers:
            lower = name.lower()
            if lower == b"transfer-encoding":
                self._refuse(400, "a request asking for an upgrade cannot send a chunked body")
                return
            if lower == b"content-length":
                length = int(value)
        alone = self._current is None and not self._queue
        try:
            settings = h2c_settings(self._headers) if self._switch_to_h2 and alone else None
        except UpgradeRefused as refused:
            log.warning(
                "http.h1.upgrade_refused",
                binding=self._setup.binding,
                remote=self._remote,
                reason=str(refused),
            )
            self._count("ssegate.http1.upgrades.refused")
            self._refuse(refused.status, str(refused))
            return
        self._upgrading = _Upgrading(received, length, settings)
        self._body_open = True
        self.data_received(rest)

    def _upgraded(self, upgrading: _Upgrading, rest: bytes) -> bool:
        """The upgrade request is complete: True when the connection went to HTTP/2."""
        received = upgrading.received
        received.body = bytes(upgrading.body)
        switch = self._switch_to_h2
        if upgrading.settings is None or switch is None or self._current or self._queue:
            self._queue.append(received)
            return False
        self._closing = True  # nothing more is read or answered here
        self._stop_timers()
        self.write(SWITCHING)
        switch(as_stream_one(received.request), received.body, upgrading.settings, rest)
        return True

    # -- internals ----------------------------------------------------------------------------

    def _count_head(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > self._limits.max_header_bytes:
            self._reject(431)

    def _reject(self, status: int, reason: str = "request rejected") -> None:
        self._reject_status = status
        self._reject_reason = reason
        raise _Rejected(status)

    def _refuse(self, status: int, reason: str) -> None:
        """Stop reading; answer ``status`` once the responses before it are done, then close."""
        self._failed = True
        self._in_head = False
        self._queue.append(_Refused(status, reason))
        self._pause_reading()
        self._start_next()

    def _time_body(self) -> None:
        """The request being read has a complete head and not its body: give it a deadline."""
        if not self._body_timed:
            self._body_timed = True
            self._deadlines.expect(self._request_number)

    def _request_overdue(self, number: int) -> None:
        """The request timeout passed since request ``number`` had its head: 408 if its body
        is still not complete."""
        if number != self._request_number or not self._body_open:
            return
        if self._failed or self._closing:
            return
        self._upgrading = None
        log.warning(
            "http.h1.request_timeout",
            binding=self._setup.binding,
            remote=self._remote,
            timeout=self._limits.http1_request_timeout,
        )
        self._count("ssegate.http1.requests.timed_out")
        self._refuse(408, "the request body did not arrive within the request timeout")

    def _build_request(self) -> Request:
        headers: dict[str, str] = {}
        for raw_name, raw_value in self._headers:
            name = raw_name.decode("latin-1").lower()
            value = raw_value.decode("latin-1")
            if name in headers:
                headers[name] += ("; " if name == "cookie" else ", ") + value
            else:
                headers[name] = value
        method = self._parser.get_method().decode("ascii", "replace").upper()
        return Request(
            method=method,
            scheme=self._setup.scheme,
            authority=headers.get("host", ""),
            target=b"".join(self._url).decode("latin-1"),
            headers=headers,
            version=self._parser.get_http_version(),
            remote=self._remote,
            connection_id=self._setup.connection_id,
        )

    def _start_next(self) -> None:
        if self._starting:
            return
        self._starting = True
        try:
            while self._current is None and self._queue and self.writable:
                item = self._queue.pop(0)
                if isinstance(item, _Refused):
                    self._answer_refusal(item)
                    return
                self._resume_reading_if_short()
                if self._refuse_status is not None:
                    self._answer_refusal(_Refused(self._refuse_status, "HTTP/1.1 not offered"))
                    return
                stream = Http1ResponseStream(self, item.request, item.keep_alive)
                self._current = stream
                self._dispatch(item.request, item.body, stream)
            if self._current is None and not self._queue and not self._timer.armed:
                self._arm_idle()
        finally:
            self._starting = False

    def _answer_refusal(self, refusal: _Refused) -> None:
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

"""HTTP/1.1 on one connection: requests read with ``httptools``, answered one at a time.

:class:`Http1Protocol` reads the requests of the connection and queues them for the answering
half it extends (:class:`~ssegate.bindings.http.h1_response.Http1Responder`), which answers them
strictly in order, one response at a time: pipelined requests wait in that queue (reading pauses
when it is long) until the response before them has ended. A request that cannot be parsed is
answered, in its turn, with the status it earned and the connection closes: 400 for a malformed
request line or header, or for a head :func:`~ssegate.bindings.http.h1_head.head_refusal`
refuses (a bad ``content-length``, an HTTP/1.1 request without a ``Host`` header or any request
with more than one, RFC 9112 §3.2), 431 for a head over the header limit, 413 for a body over
the body limit, 505 for an HTTP version other than 1.0 and 1.1. A request whose head is complete
and whose body has not ended within ``HttpLimits.http1_request_timeout`` is answered 408 and the
connection closed: one ``http.h1.request_timeout`` log line and a count in
``ssegate.http1.requests.timed_out``.

A request asking for ``Upgrade: h2c`` on a cleartext connection of a server offering h2 is
answered ``101 Switching Protocols`` and the connection goes on as HTTP/2
(:mod:`ssegate.bindings.http.h2c`); other upgrades are answered as plain HTTP/1.1. One whose
``HTTP2-Settings`` hold a value HTTP/2 forbids is answered 400 naming the setting, with no 101:
one ``http.h1.upgrade_refused`` log line and a count in ``ssegate.http1.upgrades.refused``.

How a response is framed (chunked, close-delimited, ``content-length``), written and ended is
for its :class:`~ssegate.bindings.http.h1_response.Http1ResponseStream`. A keep-alive connection
with no request in flight closes after the idle timeout; a streaming response in flight keeps it
busy, however quiet.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

import httptools

from ssegate.bindings.http.h1_head import REJECTED, head_refusal, request_of
from ssegate.bindings.http.h1_response import MAX_QUEUED_REQUESTS, Http1Responder, Received, Refused
from ssegate.bindings.http.h2c import SWITCHING, UpgradeRefused, as_stream_one, h2c_settings
from ssegate.bindings.http.types import ConnectionSetup
from ssegate.contract.exchange import Request
from ssegate.telemetry import log

SwitchToH2 = Callable[[Request, bytes, bytes, bytes], None]
"""Hand the connection to HTTP/2: the upgraded request, its body, its ``HTTP2-Settings``
(padded base64url) and the bytes that followed the request."""

_DETACHED = httptools.HttpRequestParser(object())
"""The parser a closed connection holds instead of its own, which calls the connection back
(a reference cycle); never fed: a closed connection reads nothing."""


class _Rejected(Exception):
    """Raised from a parser callback to stop parsing; the status is kept on the protocol."""


@dataclass(slots=True)
class _Upgrading:
    """A request that asked for an upgrade, held out of the queue while its body arrives (the
    parser stops at the end of such a head)."""

    received: Received
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


class Http1Protocol(Http1Responder):
    """One HTTP/1.x connection: parses requests, hands them to ``dispatch`` one at a time."""

    def __init__(
        self,
        setup: ConnectionSetup,
        *,
        refuse_status: int | None = None,
        switch_to_h2: SwitchToH2 | None = None,
    ) -> None:
        super().__init__(setup, refuse_status)
        self._switch_to_h2 = switch_to_h2
        """Set on a cleartext connection of a server offering h2: ``Upgrade: h2c`` is taken."""
        self._upgrading: _Upgrading | None = None
        self._parser = httptools.HttpRequestParser(self)
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
        self._reject_reason = REJECTED

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
        refusal = head_refusal(version, self._headers, self._limits.max_body_bytes)
        if refusal is not None:
            self._reject(*refusal)

    def on_body(self, body: bytes) -> None:
        self._body += body
        if len(self._body) > self._limits.max_body_bytes:
            self._reject(413)

    def on_message_complete(self) -> None:
        self._body_open = False
        parser = self._parser
        method, version = parser.get_method(), parser.get_http_version()
        request = request_of(method, version, self._url, self._headers, self._setup, self._remote)
        self._queue.append(Received(request, bytes(self._body), parser.should_keep_alive()))
        self._body = bytearray()
        if len(self._queue) >= MAX_QUEUED_REQUESTS:
            self._pause_reading()

    # -- upgrades -----------------------------------------------------------------------------

    def _upgrade_asked(self, rest: bytes) -> None:
        """The parser stopped after the head of a request asking for an upgrade (``rest``
        follows it): read its body, then switch to HTTP/2 (h2c) or answer it as HTTP/1.1 and
        parse what follows as the next request. Other upgrades (websocket) are not offered."""
        received = self._queue.pop() if self._queue else None
        if not isinstance(received, Received):
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

    def _reject(self, status: int, reason: str = REJECTED) -> None:
        self._reject_status = status
        self._reject_reason = reason
        raise _Rejected(status)

    def _refuse(self, status: int, reason: str) -> None:
        """Stop reading; answer ``status`` once the responses before it are done, then close."""
        self._failed = True
        self._in_head = False
        self._queue.append(Refused(status, reason))
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

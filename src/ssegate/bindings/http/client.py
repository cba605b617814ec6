"""The ``http`` client binding: one outgoing request and its streamed response.

:meth:`HttpClient.open_stream` connects through the binding's exit (a ``tcp`` client, or a
``tls`` client wrapping one), sends one request and reports the response through callbacks as
it arrives: ``on_response(status, headers)`` once, ``on_data(bytes)`` per body chunk, then
exactly one of ``on_end()`` or ``on_error(exc)`` — none after :meth:`ClientStream.cancel`.

Each stream has its own connection (SSE responses are long-lived, so there is little to pool).
The request head is built and checked by :mod:`ssegate.bindings.http.request_head`; one it
refuses (a header value holding CR, LF or NUL, a target with a space) ends the stream with
:class:`RequestRefused` before anything is written. HTTP/1.1 responses are parsed with
httptools (chunked, length-delimited or close-delimited bodies); HTTP/2 uses the ``h2`` library,
with prior knowledge on cleartext and ALPN over TLS. With both ``versions`` on cleartext,
HTTP/1.1 is used.

Options, Zilla's first then ssegate's own:

- ``versions``: ``http/1.1``, ``h2`` or both.
- ``max-head-bytes`` (default 64 KiB): the most bytes of a response head — status line and
  header fields, interim 1xx heads included (on HTTP/2 the HPACK size of the header list).
- ``max-headers`` (default 100): the most header fields of a response head.

A response head past either limit ends the stream with :class:`ResponseHeadTooLarge`
(``http.client.response_head_too_large``, ``ssegate.http.client.head_limit{limit}``): an
upstream whose head never ends costs at most the limit and one read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
import hpack.exceptions
import httptools

from ssegate.bindings.http.request_head import (
    RequestHead,
    RequestRefused,
    http1_request,
    http2_request,
)
from ssegate.bindings.tcp.client import TcpClient, require_address
from ssegate.bindings.tls.client import TlsClient
from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding
from ssegate.engine.context import BuildContext, ExitKind
from ssegate.telemetry import log
from ssegate.telemetry.metrics import Metrics

VERSIONS = ("http/1.1", "h2")
DEFAULT_MAX_HEAD_BYTES = 64 << 10
DEFAULT_MAX_HEADERS = 100

OnResponse = Callable[[int, dict[str, str]], None]
OnData = Callable[[bytes], None]
OnEnd = Callable[[], None]
OnError = Callable[[Exception], None]


class UpstreamProtocolError(ConnectionError):
    """The upstream broke the HTTP protocol, or went away in the middle of a response."""


class ResponseHeadTooLarge(UpstreamProtocolError):
    """The upstream's response head went past ``max-head-bytes`` or ``max-headers``."""

    def __init__(self, limit: str, bound: int) -> None:
        what = "bytes" if limit == "bytes" else "header fields"
        super().__init__(f"upstream response head is over {bound} {what}")
        self.limit = limit
        """``bytes`` or ``headers``: the limit that was hit."""
        self.bound = bound


@dataclass(frozen=True, slots=True)
class HeadLimits:
    """The bounds of one upstream response head."""

    max_bytes: int = DEFAULT_MAX_HEAD_BYTES
    max_headers: int = DEFAULT_MAX_HEADERS

    def count(self, head_bytes: int, headers: int) -> ResponseHeadTooLarge | None:
        """The limit a head of ``head_bytes`` and ``headers`` fields is past, if any."""
        if head_bytes > self.max_bytes:
            return ResponseHeadTooLarge("bytes", self.max_bytes)
        if headers > self.max_headers:
            return ResponseHeadTooLarge("headers", self.max_headers)
        return None


@dataclass(slots=True)
class _Callbacks:
    on_response: OnResponse
    on_data: OnData
    on_end: OnEnd
    on_error: OnError


class ClientStream:
    """One request in flight; :meth:`cancel` closes its connection without further callbacks."""

    def __init__(self, exchange: _Exchange) -> None:
        self._exchange = exchange

    def cancel(self) -> None:
        self._exchange.cancel()


class _Exchange(asyncio.Protocol):
    """The connection of one request: picks HTTP/1.1 or HTTP/2 once connected.

    No exception leaves a protocol callback: whatever goes wrong ends the stream through
    ``on_error``.
    """

    def __init__(self, client: HttpClient, request: RequestHead, callbacks: _Callbacks) -> None:
        self.client = client
        self._request = request
        self._callbacks = callbacks
        self._transport: asyncio.Transport | None = None
        self._core: _Http1Core | _Http2Core | None = None
        self.done = False

    def connection_made(self, base: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but behave as one.
        transport = cast(asyncio.Transport, base)
        self._transport = transport
        ssl_object = transport.get_extra_info("ssl_object")
        alpn = ssl_object.selected_alpn_protocol() if ssl_object is not None else None
        use_h2 = alpn == "h2" if alpn else self.client.versions == ("h2",)
        limits = self.client.limits
        try:
            self._core = _Http2Core(self, limits) if use_h2 else _Http1Core(self, limits)
            self._core.start(transport, self._request)
        except RequestRefused as exc:
            self.client.refused(self._request, exc)
            self.fail(exc)
        except Exception as exc:
            self.fail(self.client.broke("connection_made", exc))

    def data_received(self, data: bytes) -> None:
        if self._core is not None and not self.done:
            try:
                self._core.feed(data)
            except Exception as exc:
                self.fail(self.client.broke("data_received", exc))

    def eof_received(self) -> bool | None:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self._core is not None and not self.done:
            self._core.lost()
        self.fail(UpstreamProtocolError("upstream closed the connection before the response"))

    # -- what the cores report --------------------------------------------------------------

    def response(self, status: int, headers: dict[str, str]) -> None:
        if not self.done:
            self._callbacks.on_response(status, headers)

    def body(self, data: bytes) -> None:
        if not self.done and data:
            self._callbacks.on_data(data)

    def finish(self) -> None:
        if not self.done:
            self.done = True
            self._close()
            self._callbacks.on_end()

    def fail(self, exc: Exception) -> None:
        if not self.done:
            self.done = True
            self._close()
            self._callbacks.on_error(exc)

    def head_too_large(self, exc: ResponseHeadTooLarge) -> None:
        if not self.done:
            self.client.head_too_large(self._request, exc)
            self.fail(exc)

    def cancel(self) -> None:
        self.done = True
        self._close()

    def _close(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()


class _Http1Core:
    """HTTP/1.1 on one connection, for one request.

    The response head is measured twice over: the parts httptools reports (status reason,
    whole header fields) as they come, and, after each read that leaves the head unfinished,
    every byte read so far — which catches a header that never ends, which httptools holds
    without reporting it.
    """

    def __init__(self, exchange: _Exchange, limits: HeadLimits) -> None:
        self._exchange = exchange
        self._limits = limits
        self._parser = httptools.HttpResponseParser(self)
        self._headers: dict[str, str] = {}
        self._header_name = ""
        self._close_delimited = False
        self._headers_done = False
        self._head_read = 0
        """Bytes read while the head was unfinished."""
        self._head_parsed = 0
        """Bytes of the head that httptools reported."""
        self._header_count = 0
        self._over: ResponseHeadTooLarge | None = None

    def start(self, transport: asyncio.Transport, request: RequestHead) -> None:
        transport.write(http1_request(request))

    def feed(self, data: bytes) -> None:
        if not self._headers_done:
            self._head_read += len(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            if self._over is not None:
                self._exchange.head_too_large(self._over)
            else:
                self._exchange.fail(UpstreamProtocolError(f"bad HTTP/1.1 response: {exc}"))
            return
        if not self._headers_done:
            over = self._limits.count(self._head_read, self._header_count)
            if over is not None:
                self._exchange.head_too_large(over)

    def lost(self) -> None:
        if self._headers_done and self._close_delimited:
            self._exchange.finish()

    def _measure(self, size: int, fields: int = 0) -> None:
        self._head_parsed += size
        self._header_count += fields
        over = self._limits.count(self._head_parsed, self._header_count)
        if over is not None:
            self._over = over
            raise over  # stops httptools; feed() reports it

    # -- httptools callbacks ---------------------------------------------------------------

    def on_status(self, reason: bytes) -> None:
        self._measure(len(b"HTTP/1.1 200 \r\n") + len(reason))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._measure(len(name) + len(value) + 4, 1)
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        previous = self._headers.get(key)
        self._headers[key] = text if previous is None else f"{previous}, {text}"

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200:
            self._headers = {}
            return
        self._headers_done = True
        self._close_delimited = (
            "content-length" not in self._headers
            and "chunked" not in self._headers.get("transfer-encoding", "").lower()
        )
        self._exchange.response(status, self._headers)

    def on_body(self, body: bytes) -> None:
        self._exchange.body(body)

    def on_message_complete(self) -> None:
        if self._headers_done:
            self._exchange.finish()


class _Http2Core:
    """HTTP/2 on one connection, for one request on stream 1.

    The head's size is HPACK's (each field counts 32 bytes more than its name and value); it is
    advertised in ``SETTINGS_MAX_HEADER_LIST_SIZE`` and enforced by h2's decoder from the start.
    """

    def __init__(self, exchange: _Exchange, limits: HeadLimits) -> None:
        self._exchange = exchange
        self._limits = limits
        config = h2.config.H2Configuration(client_side=True, header_encoding=None)
        self._conn = h2.connection.H2Connection(config=config)
        self._transport: asyncio.Transport | None = None
        self._stream_id = 1

    def start(self, transport: asyncio.Transport, request: RequestHead) -> None:
        fields = http2_request(request, _H2_DROPPED)
        self._transport = transport
        conn = self._conn
        max_bytes = self._limits.max_bytes
        conn.initiate_connection()
        conn.update_settings({h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: max_bytes})
        conn.decoder.max_header_list_size = max_bytes
        self._stream_id = conn.get_next_available_stream_id()
        try:
            conn.send_headers(self._stream_id, fields, end_stream=True)
        except h2.exceptions.ProtocolError as exc:
            raise RequestRefused(f"invalid request: {exc}") from None
        transport.write(conn.data_to_send())

    def feed(self, data: bytes) -> None:
        exchange = self._exchange
        try:
            events = self._conn.receive_data(data)
        except h2.exceptions.ProtocolError as exc:
            if isinstance(exc.__cause__, hpack.exceptions.OversizedHeaderListError):
                exchange.head_too_large(ResponseHeadTooLarge("bytes", self._limits.max_bytes))
            else:
                exchange.fail(UpstreamProtocolError(f"bad HTTP/2 response: {exc}"))
            return
        for event in events:
            if isinstance(event, h2.events.ResponseReceived):
                over = self._limits.count(0, len(event.headers) - 1)  # not :status
                if over is not None:
                    exchange.head_too_large(over)
                    return
                fields = {
                    bytes(k).decode("latin-1"): bytes(v).decode("latin-1") for k, v in event.headers
                }
                status = int(fields.pop(":status", "0"))
                exchange.response(status, fields)
            elif isinstance(event, h2.events.DataReceived):
                self._conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                exchange.body(event.data)
            elif isinstance(event, h2.events.StreamEnded):
                exchange.finish()
            elif isinstance(event, h2.events.StreamReset):
                exchange.fail(
                    UpstreamProtocolError(f"upstream reset the stream ({event.error_code})")
                )
            elif isinstance(event, h2.events.ConnectionTerminated):
                exchange.fail(UpstreamProtocolError(f"upstream sent GOAWAY ({event.error_code})"))
        pending = self._conn.data_to_send()
        if pending and self._transport is not None and not self._transport.is_closing():
            self._transport.write(pending)

    def lost(self) -> None:
        return None


_H2_DROPPED = frozenset({"host", "connection", "keep-alive", "transfer-encoding", "upgrade"})


class HttpClient:
    """The built ``http`` client binding."""

    def __init__(
        self,
        name: str,
        versions: tuple[str, ...],
        tcp: TcpClient,
        metrics: Metrics,
        limits: HeadLimits | None = None,
        *,
        tls: TlsClient | None = None,
    ) -> None:
        self.name = name
        self.versions = versions
        self.metrics = metrics
        self.limits = limits or HeadLimits()
        self._tcp = tcp
        self._ssl = None if tls is None else tls.ssl_context
        self._server_hostname = None if tls is None else tls.server_hostname(tcp.host)
        self.scheme = "http" if tls is None else "https"

    @property
    def default_authority(self) -> str:
        """``host:port`` of the upstream, for requests that carry no authority."""
        return f"{self._tcp.host}:{self._tcp.port}"

    async def open_stream(
        self,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        *,
        on_response: OnResponse,
        on_data: OnData,
        on_end: OnEnd,
        on_error: OnError,
        authority: str | None = None,
    ) -> ClientStream:
        """Send ``method target`` with ``headers``; raises ``ConnectError`` if unreachable.

        ``target`` and ``authority`` are as the downstream sent them (Latin-1 text of their
        bytes); header values are text, sent as UTF-8. A request that cannot be sent as asked
        ends with ``on_error(RequestRefused)``.
        """
        callbacks = _Callbacks(on_response, on_data, on_end, on_error)
        request = RequestHead(
            method, self.scheme, authority or self.default_authority, target, tuple(headers)
        )
        kwargs: dict[str, Any] = {}
        if self._ssl is not None:
            kwargs = {"ssl": self._ssl, "server_hostname": self._server_hostname}
        _, exchange = await self._tcp.connect(lambda: _Exchange(self, request, callbacks), **kwargs)
        self.metrics.inc("stream.opens.sent", self.name)
        return ClientStream(exchange)

    def close(self) -> None:
        return None

    # -- what an exchange reports ----------------------------------------------------------------

    def refused(self, request: RequestHead, exc: RequestRefused) -> None:
        log.warning(
            "http.client.request_refused",
            binding=self.name,
            authority=request.authority,
            reason=str(exc),
        )
        self.metrics.inc("ssegate.http.client.requests_refused", self.name)

    def head_too_large(self, request: RequestHead, exc: ResponseHeadTooLarge) -> None:
        log.warning(
            "http.client.response_head_too_large",
            binding=self.name,
            authority=request.authority,
            limit=exc.limit,
            bound=exc.bound,
        )
        self.metrics.inc("ssegate.http.client.head_limit", self.name, limit=exc.limit)

    def broke(self, callback: str, exc: Exception) -> UpstreamProtocolError:
        """A bug met in a protocol callback, logged; returns what the stream ends with."""
        log.error("http.client.failed", binding=self.name, callback=callback, error=repr(exc))
        return UpstreamProtocolError(f"http client failed: {exc!r}")


CLIENT_EXIT: ExitKind[TcpClient | TlsClient] = ExitKind(
    (TcpClient, TlsClient), "a tcp client or a tls client"
)
TCP_CLIENT: ExitKind[TcpClient] = ExitKind(TcpClient, "a tcp client")
HTTP_CLIENT: ExitKind[HttpClient] = ExitKind(HttpClient, "an http client")
"""What an ``sse`` client exits to."""


def build(binding: Binding, ctx: BuildContext) -> HttpClient:
    options = binding.options
    versions = options.get("versions") or list(VERSIONS)
    if not binding.exit:
        raise ConfigError(f"{binding.path}.exit", "an http client needs an exit")
    exit_obj = ctx.exit(binding.exit, CLIENT_EXIT, f"{binding.path}.exit")
    tls: TlsClient | None = None
    if isinstance(exit_obj, TlsClient):
        tls = exit_obj
        tcp = require_address(ctx.exit(tls.exit, TCP_CLIENT, f"bindings.{tls.name}.exit"))
    else:
        tcp = require_address(exit_obj)
    ordered = tuple(v for v in VERSIONS if v in versions)
    limits = HeadLimits(
        _positive(options, "max-head-bytes", binding.path, DEFAULT_MAX_HEAD_BYTES),
        _positive(options, "max-headers", binding.path, DEFAULT_MAX_HEADERS),
    )
    return HttpClient(binding.name, ordered, tcp, ctx.metrics, limits, tls=tls)


def _positive(options: dict[str, Any], key: str, path: str, default: int) -> int:
    value = options.get(key, default)
    if not isinstance(value, int):  # the schema bounds it, but its integers take 5.0 too
        raise ConfigError(f"{path}.options.{key}", f"{value!r} is not a positive whole number")
    return value

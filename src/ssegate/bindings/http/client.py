"""The ``http`` client binding: one outgoing request and its streamed response.

:meth:`HttpClient.open_stream` connects through the binding's exit (a ``tcp`` client, or a
``tls`` client wrapping one), sends one request and reports the response through callbacks as
it arrives: ``on_response(status, headers)`` once, ``on_data(bytes)`` per body chunk, then
exactly one of ``on_end()`` or ``on_error(exc)`` — none after :meth:`ClientStream.cancel`.

Each stream has its own connection (SSE responses are long-lived, so there is little to pool).
HTTP/1.1 is parsed with httptools (chunked, length-delimited or close-delimited bodies); HTTP/2
uses the ``h2`` library, with prior knowledge on cleartext and ALPN over TLS. With both
``versions`` on cleartext, HTTP/1.1 is used.
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
import httptools

from ssegate.bindings.tcp.client import require_address
from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding
from ssegate.engine.context import BuildContext
from ssegate.telemetry.metrics import Metrics

VERSIONS = ("http/1.1", "h2")

OnResponse = Callable[[int, dict[str, str]], None]
OnData = Callable[[bytes], None]
OnEnd = Callable[[], None]
OnError = Callable[[Exception], None]


class UpstreamProtocolError(ConnectionError):
    """The upstream broke the HTTP protocol, or went away in the middle of a response."""


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
    """The connection of one request: picks HTTP/1.1 or HTTP/2 once connected."""

    def __init__(
        self,
        request: tuple[str, str, str, str, list[tuple[str, str]]],
        callbacks: _Callbacks,
        versions: tuple[str, ...],
    ) -> None:
        self._request = request
        self._callbacks = callbacks
        self._versions = versions
        self._transport: asyncio.Transport | None = None
        self._core: _Http1Core | _Http2Core | None = None
        self.done = False

    def connection_made(self, base: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but behave as one.
        transport = cast(asyncio.Transport, base)
        self._transport = transport
        ssl_object = transport.get_extra_info("ssl_object")
        alpn = ssl_object.selected_alpn_protocol() if ssl_object is not None else None
        use_h2 = alpn == "h2" if alpn else self._versions == ("h2",)
        self._core = _Http2Core(self) if use_h2 else _Http1Core(self)
        self._core.start(transport, *self._request)

    def data_received(self, data: bytes) -> None:
        if self._core is not None and not self.done:
            self._core.feed(data)

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

    def cancel(self) -> None:
        self.done = True
        self._close()

    def _close(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()


class _Http1Core:
    """HTTP/1.1 on one connection, for one request."""

    def __init__(self, exchange: _Exchange) -> None:
        self._exchange = exchange
        self._parser = httptools.HttpResponseParser(self)
        self._headers: dict[str, str] = {}
        self._header_name = ""
        self._close_delimited = False
        self._headers_done = False

    def start(
        self,
        transport: asyncio.Transport,
        method: str,
        scheme: str,
        authority: str,
        target: str,
        headers: list[tuple[str, str]],
    ) -> None:
        lines = [f"{method} {target} HTTP/1.1", f"host: {authority}"]
        lines.extend(f"{name}: {value}" for name, value in headers)
        transport.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))

    def feed(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._exchange.fail(UpstreamProtocolError(f"bad HTTP/1.1 response: {exc}"))

    def lost(self) -> None:
        if self._headers_done and self._close_delimited:
            self._exchange.finish()

    # -- httptools callbacks ---------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
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
    """HTTP/2 on one connection, for one request on stream 1."""

    def __init__(self, exchange: _Exchange) -> None:
        self._exchange = exchange
        config = h2.config.H2Configuration(client_side=True, header_encoding=None)
        self._conn = h2.connection.H2Connection(config=config)
        self._transport: asyncio.Transport | None = None
        self._stream_id = 1

    def start(
        self,
        transport: asyncio.Transport,
        method: str,
        scheme: str,
        authority: str,
        target: str,
        headers: list[tuple[str, str]],
    ) -> None:
        self._transport = transport
        self._conn.initiate_connection()
        self._stream_id = self._conn.get_next_available_stream_id()
        request = [(":method", method), (":scheme", scheme), (":authority", authority)]
        request.append((":path", target))
        request.extend((n.lower(), v) for n, v in headers if n.lower() not in _H2_DROPPED)
        self._conn.send_headers(self._stream_id, request, end_stream=True)
        transport.write(self._conn.data_to_send())

    def feed(self, data: bytes) -> None:
        exchange = self._exchange
        try:
            events = self._conn.receive_data(data)
        except h2.exceptions.ProtocolError as exc:
            exchange.fail(UpstreamProtocolError(f"bad HTTP/2 response: {exc}"))
            return
        for event in events:
            if isinstance(event, h2.events.ResponseReceived):
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

    def __init__(self, name: str, versions: tuple[str, ...], exit: Any, metrics: Metrics) -> None:
        self.name = name
        self.versions = versions
        self.metrics = metrics
        ssl_context = getattr(exit, "ssl_context", None)
        self._ssl = ssl_context
        self._tcp = exit.exit if ssl_context is not None else exit
        hostname = getattr(exit, "server_hostname", None)
        self._server_hostname: str | None = (
            hostname(self._tcp.host) if callable(hostname) else hostname
        )
        self.scheme = "https" if ssl_context is not None else "http"

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
        """Send ``method target`` with ``headers``; raises ``ConnectError`` if unreachable."""
        callbacks = _Callbacks(on_response, on_data, on_end, on_error)
        request = (method, self.scheme, authority or self.default_authority, target, headers)
        kwargs: dict[str, Any] = {}
        if self._ssl is not None:
            kwargs = {"ssl": self._ssl, "server_hostname": self._server_hostname}
        _, exchange = await self._tcp.connect(
            lambda: _Exchange(request, callbacks, self.versions), **kwargs
        )
        self.metrics.inc("stream.opens.sent", self.name)
        return ClientStream(exchange)

    def close(self) -> None:
        return None


def build(binding: Binding, ctx: BuildContext) -> HttpClient:
    where = f"{binding.path}.options.versions"
    versions = binding.options.get("versions") or list(VERSIONS)
    if not isinstance(versions, list) or any(v not in VERSIONS for v in versions):
        raise ConfigError(where, f"versions must be a list of {', '.join(VERSIONS)}")
    if not binding.exit:
        raise ConfigError(f"{binding.path}.exit", "an http client needs an exit")
    exit_obj = ctx.exit(binding.exit)
    inner = getattr(exit_obj, "exit", None)
    if getattr(exit_obj, "ssl_context", None) is not None and isinstance(inner, str):
        tcp = require_address(ctx.exit(inner))
        exit_obj = _TlsExit(exit_obj.ssl_context, exit_obj.server_hostname, tcp)
    else:
        exit_obj = require_address(exit_obj)
    ordered = tuple(v for v in VERSIONS if v in versions)
    return HttpClient(binding.name, ordered, exit_obj, ctx.metrics)


@dataclass(frozen=True, slots=True)
class _TlsExit:
    """A tls client whose ``exit`` was a binding name, with that name resolved.

    ``server_hostname`` is the tls client's own: a name, or a function of the upstream host.
    """

    ssl_context: Any
    server_hostname: Any
    exit: Any

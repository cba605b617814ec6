"""The protocol a listener creates for every accepted connection: HTTP/1.1 or HTTP/2.

Over TLS the choice is ALPN's: ``h2`` selected means HTTP/2, anything else HTTP/1.1. In
cleartext the first bytes decide: the HTTP/2 prior-knowledge preface (h2c) hands the connection
to HTTP/2, anything else to HTTP/1.1, which hands it over to HTTP/2 after an ``Upgrade: h2c``
request it answers 101 (:mod:`ssegate.bindings.http.h2c`). The ``versions`` a server offers are
respected: without ``h2`` the preface is just a bad HTTP/1.1 request (505), and without
``http/1.1`` every HTTP/1.1 request is answered 505 and the connection closed.

What the connection and both protocols share (``Dispatch``, ``HttpLimits``, the
``ConnectionSetup`` each protocol is created with) is in :mod:`ssegate.bindings.http.types`.
"""

from __future__ import annotations

import asyncio
import itertools

from ssegate.bindings.http.h1 import Http1Protocol
from ssegate.bindings.http.h2 import H2Protocol
from ssegate.bindings.http.types import ConnectionSetup, Dispatch, HttpLimits
from ssegate.bindings.tcp.flow import RelayProtocol, peer_address
from ssegate.contract.exchange import Request
from ssegate.telemetry import log
from ssegate.telemetry.metrics import Metrics

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
HTTP_1_1 = "http/1.1"
H2 = "h2"
ALL_VERSIONS = frozenset({HTTP_1_1, H2})

_connection_ids = itertools.count(1)


class ConnectionRegistry:
    """The open connections of one http server: counted, logged, and closed on shutdown."""

    def __init__(self, name: str = "", metrics: Metrics | None = None) -> None:
        self.name = name
        self.metrics = metrics
        self.open: set[HttpConnectionProtocol] = set()

    def opened(self, connection: HttpConnectionProtocol, peer: str, tls: bool) -> None:
        self.open.add(connection)
        if self.metrics is not None:
            self.metrics.inc("ssegate.connections.opened", self.name)
            self.metrics.gauge("ssegate.connections.active", self.name)
        log.event(
            "connection.opened", binding=self.name, id=connection.connection_id, peer=peer, tls=tls
        )

    def closed(self, connection: HttpConnectionProtocol, error: Exception | None) -> None:
        if connection not in self.open:
            return
        self.open.discard(connection)
        if self.metrics is not None:
            self.metrics.gauge("ssegate.connections.active", self.name, -1)
        reason = f"{type(error).__name__}: {error}" if error else ""
        log.event("connection.closed", binding=self.name, id=connection.connection_id, error=reason)

    def close_all(self) -> None:
        """Close every open connection (the gateway is stopping): streams end, sockets flush."""
        for connection in list(self.open):
            connection.close()


class HttpConnectionProtocol(RelayProtocol):
    """Chooses HTTP/1.1 or HTTP/2 for one connection and forwards everything to it."""

    def __init__(
        self,
        dispatch: Dispatch,
        limits: HttpLimits | None = None,
        versions: frozenset[str] = ALL_VERSIONS,
        registry: ConnectionRegistry | None = None,
    ) -> None:
        super().__init__()
        self._dispatch = dispatch
        self._registry = registry
        self._limits = limits or HttpLimits()
        self._versions = versions
        self._connection_id = next(_connection_ids)
        self._transport: asyncio.BaseTransport | None = None
        self._scheme = "http"
        self._sniffed = b""
        self._sniff_timer: asyncio.TimerHandle | None = None

    @property
    def connection_id(self) -> int:
        return self._connection_id

    def close(self) -> None:
        """Close the connection after what is already queued has been written."""
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()

    @property
    def protocol(self) -> asyncio.Protocol | None:
        """The HTTP/1.1 or HTTP/2 protocol chosen, once it is chosen."""
        return self._inner

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        ssl_object = transport.get_extra_info("ssl_object")
        if self._registry is not None:
            where = peer_address(transport) or str(transport.get_extra_info("peername"))
            self._registry.opened(self, where, ssl_object is not None)
        if ssl_object is not None:
            self._scheme = "https"
            h2_selected = ssl_object.selected_alpn_protocol() == H2
            self._choose(h2_selected and H2 in self._versions)
        elif H2 not in self._versions:
            self._choose(False)
        else:
            loop = asyncio.get_running_loop()
            self._sniff_timer = loop.call_later(self._limits.idle_timeout, transport.close)

    def data_received(self, data: bytes) -> None:
        if self._inner is not None:
            self._inner.data_received(data)
            return
        self._sniffed += data
        if len(self._sniffed) < len(H2_PREFACE) and H2_PREFACE.startswith(self._sniffed):
            return
        sniffed, self._sniffed = self._sniffed, b""
        self._choose(sniffed.startswith(H2_PREFACE))
        assert self._inner is not None
        self._inner.data_received(sniffed)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_sniff_timer()
        if self._registry is not None:
            self._registry.closed(self, exc)
        super().connection_lost(exc)

    def _choose(self, http2: bool) -> None:
        self._cancel_sniff_timer()
        if http2:
            self._start(self._http2())
            return
        cleartext_h2 = self._scheme == "http" and H2 in self._versions
        self._start(
            Http1Protocol(
                self._setup(),
                refuse_status=None if HTTP_1_1 in self._versions else 505,
                switch_to_h2=self._switch_to_h2 if cleartext_h2 else None,
            )
        )

    def _switch_to_h2(self, request: Request, body: bytes, settings: bytes, rest: bytes) -> None:
        """``Upgrade: h2c`` was answered 101: HTTP/2 from here on, ``request`` is stream 1."""
        self._start(self._http2((request, body, settings)))
        if rest:
            self.data_received(rest)

    def _http2(self, upgraded: tuple[Request, bytes, bytes] | None = None) -> H2Protocol:
        return H2Protocol(self._setup(), upgraded=upgraded)

    def _setup(self) -> ConnectionSetup:
        registry = self._registry
        return ConnectionSetup(
            self._dispatch,
            self._limits,
            self._scheme,
            self._connection_id,
            registry.name if registry is not None else "",
            registry.metrics if registry is not None else None,
        )

    def _start(self, inner: asyncio.Protocol) -> None:
        assert self._transport is not None
        self.relay_to(inner, self._transport)

    def _cancel_sniff_timer(self) -> None:
        if self._sniff_timer is not None:
            self._sniff_timer.cancel()
            self._sniff_timer = None

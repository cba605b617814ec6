"""Handing a TLS connection to the binding its negotiated ALPN protocol routes to.

A ``tls`` server's ``routes[].when[].alpn`` can send ``h2`` connections to one ``http`` binding
and ``http/1.1`` to another. The protocol is only known once the handshake is done, so the
listener creates an :class:`AlpnDispatch` for every connection, and it builds the chosen
binding's protocol in ``connection_made`` and forwards everything to it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

ProtocolFactory = Callable[[], asyncio.Protocol]


class AlpnDispatch(asyncio.Protocol):
    """Forwards one connection to the protocol of the binding its ALPN protocol routes to."""

    def __init__(self, choose: Callable[[str | None], ProtocolFactory]) -> None:
        self._choose = choose
        self._inner: asyncio.Protocol | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        ssl_object = transport.get_extra_info("ssl_object")
        alpn = ssl_object.selected_alpn_protocol() if ssl_object is not None else None
        self._inner = self._choose(alpn)()
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._inner is not None:
            self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._inner is not None else None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._inner is not None:
            self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self._inner is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._inner is not None:
            self._inner.resume_writing()


def alpn_factory(
    exit_for_alpn: Callable[[str | None], str],
    factories: dict[str, ProtocolFactory],
) -> ProtocolFactory:
    """A listener's protocol factory choosing among ``factories`` (by binding name) by ALPN."""

    def choose(alpn: str | None) -> ProtocolFactory:
        return factories[exit_for_alpn(alpn)]

    return lambda: AlpnDispatch(choose)

"""Handing a TLS connection to the binding its negotiated ALPN protocol routes to.

A ``tls`` server's ``routes[].when[].alpn`` can send ``h2`` connections to one ``http`` binding
and ``http/1.1`` to another. The protocol is only known once the handshake is done, so the
listener creates an :class:`AlpnDispatch` for every connection, and it builds the chosen
binding's protocol in ``connection_made`` and forwards everything to it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ssegate.bindings.tcp.flow import RelayProtocol

ProtocolFactory = Callable[[], asyncio.Protocol]


class AlpnDispatch(RelayProtocol):
    """Forwards one connection to the protocol of the binding its ALPN protocol routes to."""

    def __init__(self, choose: Callable[[str | None], ProtocolFactory]) -> None:
        super().__init__()
        self._choose = choose

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        ssl_object = transport.get_extra_info("ssl_object")
        alpn = ssl_object.selected_alpn_protocol() if ssl_object is not None else None
        self.relay_to(self._choose(alpn)(), transport)


def alpn_factory(
    exit_for_alpn: Callable[[str | None], str],
    factories: dict[str, ProtocolFactory],
) -> ProtocolFactory:
    """A listener's protocol factory choosing among ``factories`` (by binding name) by ALPN."""

    def choose(alpn: str | None) -> ProtocolFactory:
        return factories[exit_for_alpn(alpn)]

    return lambda: AlpnDispatch(choose)

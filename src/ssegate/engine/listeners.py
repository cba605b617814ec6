"""What the runtime needs of the bindings that accept connections, declared here so the engine
depends on no binding.

A ``tcp`` server binding is :class:`TcpListening` (addresses, each with the binding its
connections go to); what a listener hands its connections to is a :class:`ConnectionHandler`
(the ``http`` server) or a :class:`TlsTermination` (the ``tls`` server, which chooses among
connection handlers by ALPN once a connection's handshake is done). The runtime binds the
sockets; the bindings never see one.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from ssegate.engine.context import ExitKind
from ssegate.telemetry.metrics import Metrics

ProtocolFactory = Callable[[], asyncio.Protocol]


class ListenAddress(Protocol):
    @property
    def host(self) -> str: ...

    @property
    def port(self) -> int: ...

    @property
    def exit(self) -> str:
        """The binding this address's connections go to."""


@runtime_checkable
class TcpListening(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def listeners(self) -> Sequence[ListenAddress]: ...


@runtime_checkable
class ConnectionHandler(Protocol):
    """A binding that takes accepted connections (the http server)."""

    def protocol_factory(self) -> ProtocolFactory:
        """What a listener calls for every accepted connection."""


@runtime_checkable
class TlsTermination(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def ssl_context(self) -> ssl.SSLContext: ...

    def exits(self) -> set[str]:
        """Every binding its connections may be handed to."""

    def dispatch(self, factories: Mapping[str, ProtocolFactory]) -> ProtocolFactory:
        """The listener's protocol factory, given one factory per name of :meth:`exits`."""

    def prepare_loop(self, loop: asyncio.AbstractEventLoop, metrics: Metrics) -> None:
        """Anything the loop must do for TLS connections (reporting handshake failures)."""


CONNECTION_HANDLER: ExitKind[ConnectionHandler] = ExitKind(
    ConnectionHandler, "a binding that takes connections (an http server)"
)
LISTENER_EXIT: ExitKind[TlsTermination | ConnectionHandler] = ExitKind(
    (TlsTermination, ConnectionHandler), "a tls server or an http server"
)
TCP_SERVER: ExitKind[TcpListening] = ExitKind(TcpListening, "a tcp server")

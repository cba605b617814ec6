"""The contract between the HTTP server and the bindings it routes to.

The HTTP/1.1 and HTTP/2 protocol edges turn bytes into a :class:`Request` and hand it, with the
request body (bodies here are small: challenge answers, validated requests) and a
:class:`ResponseStream`, to the :class:`HttpHandler` that the routes chose. The handler answers
through the stream. Nothing in a handler touches a socket, so the same SSE, filesystem or
sse-kafka handler serves HTTP/1.1 and HTTP/2 alike.

Streams never block: ``send_data`` buffers, ``buffered`` tells how much is still unsent
(``unsent`` counts the kernel's send queue too), ``writable`` says whether the last write was
taken whole by what lies below the stream, and ``on_drain`` is called when it may be writable
again (the buffer was flushed below its low-water mark, a flow-control window opened). That
is the one backpressure signal, the same for HTTP/1.1, HTTP/2 streams and TLS. A slow client is
the handler's policy to decide (the SSE server stalls it when a write leaves it not writable, and
aborts it past a limit, which frees its buffers at once).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, cast, runtime_checkable
from urllib.parse import parse_qsl

from ssegate.contract.conforms import conforms

if TYPE_CHECKING:
    from ssegate.contract.guard import Guard
    from ssegate.contract.identity import Authorization


@dataclass(frozen=True, slots=True)
class Request:
    """One HTTP request, the same for HTTP/1.1 and HTTP/2.

    Immutable once built: a step that learns something about the request (the route's
    parameters, the guards' identities, the guards that admitted it, headers an override sets)
    passes on a copy that says it (:func:`dataclasses.replace`), and the request it was handed
    stays as it was."""

    method: str
    """Upper-case method, ``GET``."""
    scheme: str
    """``http`` or ``https``."""
    authority: str
    """``host[:port]``, from ``:authority`` or ``Host``."""
    target: str
    """The request target as sent: path and query, ``/events?lastEventId=1``."""
    headers: dict[str, str]
    """Lower-case names; repeated headers joined with ``, `` (``cookie`` with ``; ``)."""
    version: str = "1.1"
    """``1.1`` or ``2``."""
    remote: str = ""
    """The peer's address, ``127.0.0.1:50312``."""
    params: Mapping[str, str] = field(default_factory=dict)
    """Parameters captured by route patterns on the way (``{path}`` → ``params['path']``)."""
    identities: Mapping[str, Authorization] = field(default_factory=dict)
    """What guards established, by guard name (from the http server's authorization)."""
    authorized_by: Mapping[str, Guard] = field(default_factory=dict)
    """The guards whose guarded routes let this request through on its way (http server, sse
    server, sse-kafka proxy), by name: a stream it opens is kept authorized under each."""
    credentials_hints: Mapping[str, str] | None = None
    """How to present each guard's credentials (``"Authorization: Bearer <token>"``), by guard
    name, from the http server's ``options.authorization``: what a 401 or 403 tells the client."""
    connection_id: int = 0
    """Identifies the network connection; HTTP/2 streams of one connection share it."""

    @property
    def path(self) -> str:
        """The target without its query string."""
        q = self.target.find("?")
        return self.target if q < 0 else self.target[:q]

    @property
    def query(self) -> str:
        """The raw query string, without ``?``; empty when there is none."""
        q = self.target.find("?")
        return "" if q < 0 else self.target[q + 1 :]

    def query_param(self, name: str) -> str | None:
        """The first value of query parameter ``name``, URL-decoded, or ``None``."""
        query = self.query
        if not query:
            return None
        for key, value in parse_qsl(query, keep_blank_values=True):
            if key == name:
                return value
        return None


@runtime_checkable
class Descriptor(Protocol):
    """What a transport's ``socket`` extra info is (a socket, asyncio's or uvloop's wrapper)."""

    def fileno(self) -> int: ...


@dataclass(slots=True, eq=False)
class DirectSocket:
    """Where a group write (:mod:`ssegate.bindings.sse.fanout`) may put whole HTTP/1.1 chunks of
    a response itself, past the response stream: a cleartext TCP socket (its ``fd``; how the
    order holds: :func:`ssegate.bindings.tcp.fanout.send_to_all`), or, ``sealed``, a TLS
    connection's transport, whose record layer the bytes must go through (``fd`` is -1). A
    write to a sealed one is :meth:`transport.write`, as the response's own would be, so it
    keeps the order whatever the transport holds.
    """

    fd: int
    transport: asyncio.Transport
    sent: int = 0
    """Body bytes written this way, which the response's size counts."""
    sealed: bool = False
    """A TLS connection: written through its transport, never to its socket."""

    @classmethod
    def of(cls, transport: asyncio.BaseTransport) -> DirectSocket | None:
        """Where bytes may go past a response on ``transport`` (open): its socket when it is
        cleartext, the transport itself (``sealed``) over TLS."""
        if transport.is_closing():
            return None
        # uvloop's transports implement asyncio.Transport without subclassing it.
        if transport.get_extra_info("ssl_object") is not None:
            return cls(-1, cast(asyncio.Transport, transport), sealed=True)
        sock = transport.get_extra_info("socket")
        fd = sock.fileno() if conforms(sock, Descriptor) else -1
        if not isinstance(fd, int) or fd < 0:
            return None
        return cls(fd, cast(asyncio.Transport, transport))

    @property
    def writable(self) -> bool:
        """A direct write keeps the order: the transport is open and, for a socket, holds
        nothing."""
        transport = self.transport
        if transport.is_closing():
            return False
        return self.sealed or not transport.get_write_buffer_size()


class ResponseStream(Protocol):
    """One response: an HTTP/1.1 exchange or an HTTP/2 stream."""

    def send_headers(
        self, status: int, headers: list[tuple[str, str]], *, end: bool = False
    ) -> None:
        """Start the response. With ``end=True`` the response has no body."""

    def send_data(self, data: bytes, *, end: bool = False) -> None:
        """Queue body bytes; never blocks. ``end=True`` finishes the response."""

    def reset(self) -> None:
        """Abandon the response: HTTP/2 ``RST_STREAM(NO_ERROR)``, HTTP/1.1 close."""

    def abort(self, connection_limit: int) -> None:
        """Abandon the response and free what is queued for it at once: HTTP/1.1 resets the
        connection (RST; nothing queued is sent), HTTP/2 sends ``RST_STREAM(CANCEL)`` and resets
        the connection too when more than ``connection_limit`` bytes of it are unsent."""

    @property
    def buffered(self) -> int:
        """Bytes accepted by ``send_data`` and not yet handed to the kernel."""

    @property
    def unsent(self) -> int:
        """``buffered`` plus what the kernel holds unsent for the peer: how far behind it is.
        Costs a system call, so it is for periodic checks rather than every write."""

    @property
    def writable(self) -> bool:
        """The stream's last write was taken whole by what lies below it, so more may be
        written now: an HTTP/1.1 response's transport is not paused (for a chunked response
        over cleartext or TLS, whose socket takes little unsent, nothing is left in it); an
        HTTP/2 stream holds nothing its flow-control window keeps back and its connection's
        transport is not paused. ``on_drain`` callbacks run when it may have become so again."""

    @property
    def closed(self) -> bool:
        """True once the response ended, was reset, or the peer went away."""

    def on_close(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once when the stream closes for any reason."""

    def on_drain(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` each time the stream may be ``writable`` again: a full buffer
        drained below its low-water mark, or (HTTP/2) the data a window kept back went out."""

    def direct_socket(self) -> DirectSocket | None:
        """Where a group write may put this response's whole chunks itself while it streams
        chunked HTTP/1.1: its cleartext socket, or its TLS transport (``sealed``); ``None`` for
        any other response (HTTP/2, HTTP/1.0, ended)."""


@runtime_checkable
class HttpHandler(Protocol):
    """What an http server route exits to (sse server, http-filesystem, ...)."""

    def handle(self, request: Request, body: bytes, stream: ResponseStream) -> None:
        """Answer ``request`` on ``stream``. Must not raise for bad input: answer it."""


def simple_response(
    stream: ResponseStream,
    status: int,
    body: bytes = b"",
    headers: list[tuple[str, str]] | None = None,
    *,
    content_type: str = "text/plain; charset=utf-8",
) -> None:
    """Send a complete response with a small body (errors, 204s)."""
    all_headers = list(headers or [])
    if body:
        all_headers.append(("content-type", content_type))
    all_headers.append(("content-length", str(len(body))))
    if body:
        stream.send_headers(status, all_headers)
        stream.send_data(body, end=True)
    else:
        stream.send_headers(status, all_headers, end=True)

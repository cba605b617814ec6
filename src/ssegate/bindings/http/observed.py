"""What a route's exit answers through: :class:`ObservedStream`, the http server's view of one
response.

The http server (:mod:`ssegate.bindings.http.server`) hands each exit this wrapper of the
protocol's :class:`~ssegate.contract.exchange.ResponseStream`, so the exit's headers get the
binding's CORS response headers and every body byte sent is counted for the exchange's size,
those a group write sends straight to the response's socket included.
"""

from __future__ import annotations

from collections.abc import Callable

from ssegate.bindings.http.cors import AccessControl
from ssegate.contract.exchange import DirectSocket, Request, ResponseStream


class ObservedStream:
    """A handler's view of a response: adds CORS headers and counts what is sent."""

    def __init__(self, stream: ResponseStream, request: Request, access: AccessControl) -> None:
        self._stream = stream
        self._request = request
        self._access = access
        self.status = 0
        self._sent = 0
        self._direct: DirectSocket | None = None
        """The socket handed out for direct writes (one per response), whose bytes count too."""
        self.cors = True
        """False for answers that carry their own CORS headers (preflights)."""

    @property
    def headers_sent(self) -> bool:
        return self.status != 0

    @property
    def sent_bytes(self) -> int:
        """Body bytes sent, through the stream and directly to its socket."""
        direct = self._direct
        return self._sent + (direct.sent if direct is not None else 0)

    def send_headers(
        self, status: int, headers: list[tuple[str, str]], *, end: bool = False
    ) -> None:
        if self.status:
            return
        self.status = status
        extra = self._access.response_headers(self._request, headers) if self.cors else []
        self._stream.send_headers(status, [*headers, *extra] if extra else headers, end=end)

    def send_data(self, data: bytes, *, end: bool = False) -> None:
        if not self.status:
            self.send_headers(200, [])
        self._sent += len(data)
        self._stream.send_data(data, end=end)

    def reset(self) -> None:
        self._stream.reset()

    def abort(self, connection_limit: int) -> None:
        self._stream.abort(connection_limit)

    @property
    def buffered(self) -> int:
        return self._stream.buffered

    @property
    def unsent(self) -> int:
        return self._stream.unsent

    @property
    def writable(self) -> bool:
        return self._stream.writable

    @property
    def closed(self) -> bool:
        return self._stream.closed

    def on_close(self, callback: Callable[[], None]) -> None:
        self._stream.on_close(callback)

    def direct_socket(self) -> DirectSocket | None:
        direct = self._stream.direct_socket()
        if direct is not None:
            self._direct = direct
        return direct

    def on_drain(self, callback: Callable[[], None]) -> None:
        self._stream.on_drain(callback)

"""What the connection, HTTP/1.1 and HTTP/2 share: how a request reaches the server, the limits,
and what each protocol is set up with.

Both protocols and the connection that chooses between them import this module, and it imports
none of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ssegate.bindings.http.h2_floods import FrameBudgets
from ssegate.contract.exchange import Request, ResponseStream
from ssegate.telemetry.metrics import Metrics

Dispatch = Callable[[Request, bytes, ResponseStream], None]
"""Answer one complete request: the server's single entry point for both protocols."""


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """Per-connection limits, the same for HTTP/1.1 and HTTP/2 where they apply to both."""

    max_body_bytes: int = 1 << 20
    """A larger request body is answered 413."""
    max_header_bytes: int = 16 << 10
    """Request line (or pseudo-headers) plus headers over this is answered 431."""
    idle_timeout: float = 60.0
    """Seconds a connection with no request in flight stays open."""
    max_concurrent_streams: int = 256
    """HTTP/2 ``SETTINGS_MAX_CONCURRENT_STREAMS``."""
    initial_window_size: int = 1 << 20
    """HTTP/2 receive window per stream and for the connection."""
    frames: FrameBudgets = field(default_factory=FrameBudgets)
    """HTTP/2 frames of each kind a connection may send per second; past it, GOAWAY."""
    max_unread_acks: int = 1000
    """HTTP/2 PING and SETTINGS acknowledgements queued while the peer reads nothing (the
    connection's write buffer is over its high-water mark); one more closes the connection."""
    request_timeout: float = 10.0
    """Seconds an HTTP/2 request may take to end its stream before it is reset (CANCEL)."""
    http1_request_timeout: float = 10.0
    """Seconds an HTTP/1.1 request may take, from the end of its head to the end of its body,
    before it is answered 408 and the connection closed."""


@dataclass(frozen=True, slots=True)
class ConnectionSetup:
    """What the HTTP/1.1 or HTTP/2 protocol of one connection is created with."""

    dispatch: Dispatch
    limits: HttpLimits = field(default_factory=HttpLimits)
    scheme: str = "http"
    """``https`` over TLS."""
    connection_id: int = 0
    binding: str = ""
    """The http server binding, for log lines and metrics."""
    metrics: Metrics | None = None

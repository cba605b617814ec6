"""The head of an HTTP/2 request as ``h2`` reports it (a ``RequestReceived`` header block): the
:class:`~ssegate.contract.exchange.Request` it becomes, and its size against the header limit.

:func:`request_of` takes ``:method`` (``GET`` when absent), ``:scheme`` (the connection's when
absent), ``:authority`` (else the ``host`` header) and ``:path`` from the pseudo-header fields,
joins repeated fields (cookies with ``; ``, others with ``, ``) and gives the block's size as
``SETTINGS_MAX_HEADER_LIST_SIZE`` counts it (RFC 9113 §6.5.2: each field's name and value and 32
more), which :class:`~ssegate.bindings.http.h2.H2Protocol` answers 431 past
``HttpLimits.max_header_bytes``. ``h2`` has already checked the block is well-formed. Nothing
here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable

from ssegate.bindings.http.types import ConnectionSetup
from ssegate.contract.exchange import Request


def request_of(
    block: Iterable[tuple[bytes, bytes]], setup: ConnectionSetup, remote: str
) -> tuple[Request, int]:
    """The request of a header ``block`` on the connection of ``setup``, and the block's size."""
    pseudo: dict[bytes, bytes] = {}
    headers: dict[str, str] = {}
    size = 0
    for raw_name, raw_value in block:
        size += len(raw_name) + len(raw_value) + 32
        if raw_name.startswith(b":"):
            pseudo[raw_name] = raw_value
            continue
        name = raw_name.decode("latin-1")
        value = raw_value.decode("latin-1")
        if name in headers:
            headers[name] += ("; " if name == "cookie" else ", ") + value
        else:
            headers[name] = value
    method = pseudo.get(b":method", b"GET").decode("latin-1").upper()
    authority = pseudo.get(b":authority", b"").decode("latin-1") or headers.get("host", "")
    request = Request(
        method=method,
        scheme=pseudo.get(b":scheme", setup.scheme.encode()).decode("latin-1"),
        authority=authority,
        target=pseudo.get(b":path", b"").decode("latin-1"),
        headers=headers,
        version="2",
        remote=remote,
        connection_id=setup.connection_id,
    )
    return request, size

"""The head of an HTTP/1.x request as ``httptools`` reports it: the rules it is held to, and the
:class:`~ssegate.contract.exchange.Request` it becomes.

:func:`head_refusal` checks a complete head and gives the status and reason of the first rule it
breaks: 505 for an HTTP version other than 1.0 and 1.1; 400 for a ``content-length`` that is not
a number, 413 for one over the body limit; 400 for more than one ``Host`` header, or for an
HTTP/1.1 request without one (RFC 9112 §3.2). The limits that apply while a head still arrives
(431 past the header limit) and to the body as it arrives are the connection's
(:class:`~ssegate.bindings.http.h1.Http1Protocol`).

:func:`request_of` builds the request: names lower-cased, repeated headers joined (cookies with
``; ``, others with ``, ``), the method upper-cased, the authority from ``Host``. Nothing here
does I/O.
"""

from __future__ import annotations

from ssegate.bindings.http.types import ConnectionSetup
from ssegate.contract.exchange import Request

REJECTED = "request rejected"
"""The reason given where the status says it all."""


def head_refusal(
    version: str, raw_headers: list[tuple[bytes, bytes]], max_body_bytes: int
) -> tuple[int, str] | None:
    """The status and reason a complete head is refused with, else ``None``."""
    if version not in ("1.0", "1.1"):
        return 505, REJECTED
    hosts = 0
    for name, value in raw_headers:
        lower = name.lower()
        if lower == b"host":
            hosts += 1
        if lower != b"content-length":
            continue
        if not value.strip().isdigit():
            return 400, REJECTED
        if int(value) > max_body_bytes:
            return 413, REJECTED
    if hosts > 1:
        return 400, "more than one Host header"
    if hosts == 0 and version == "1.1":
        return 400, "an HTTP/1.1 request needs a Host header"
    return None


def request_of(
    method: bytes,
    version: str,
    url: list[bytes],
    raw_headers: list[tuple[bytes, bytes]],
    setup: ConnectionSetup,
    remote: str,
) -> Request:
    """The request of a head: its ``method``, ``version``, target (``url``, in the pieces the
    parser gave) and header fields as received, on the connection of ``setup``."""
    headers: dict[str, str] = {}
    for raw_name, raw_value in raw_headers:
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        if name in headers:
            headers[name] += ("; " if name == "cookie" else ", ") + value
        else:
            headers[name] = value
    return Request(
        method=method.decode("ascii", "replace").upper(),
        scheme=setup.scheme,
        authority=headers.get("host", ""),
        target=b"".join(url).decode("latin-1"),
        headers=headers,
        version=version,
        remote=remote,
        connection_id=setup.connection_id,
    )

"""The head of an upstream request: its fields encoded, checked, and (HTTP/1.1) serialized.

A :class:`RequestHead` holds text. The target and the authority are the bytes a downstream
sent, which the server edges read as Latin-1; they go out as those same bytes. Header values
are text (a resumed event id can be any Unicode) and go out as UTF-8. The spaces and tabs
around a value are dropped, as Fetch does for a browser's request headers, so an id of ``"5 "``
can still be resumed.

What a field value may not hold under RFC 9110 — CR, LF, NUL or other whitespace than a space
or tab between its characters — refuses the request with :class:`RequestRefused` before a byte
is written, for HTTP/1.1 and HTTP/2 alike (h2 checks the fields it receives, not the ones it
sends). Other control characters pass, as Fetch lets a browser send them (an SSE id may hold
them, and comes back as ``last-event-id``). The HTTP/1.1 bytes are built by h11, which applies
the same rules again and the ones of the request line.

Each part has one function that encodes and checks it (:func:`encode_method`,
:func:`encode_target`, :func:`encode_authority`, :func:`encode_scheme`, :func:`encode_header`):
the request writer calls them for every request, and the http server's ``options.overrides``
calls them at start-up, so a value the config accepts is one the writer can send.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import h11

_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""RFC 9110 token: a method or a field name."""
_FIELD_VALUE = re.compile(rb"(?:[^\x00\s]+(?:[ \t]+[^\x00\s]+)*)?")
"""RFC 9110 field-value, as h11 reads it: visible or non-ASCII bytes, single spaces between."""
_SCHEME = re.compile(rb"[A-Za-z][A-Za-z0-9+.-]*")
"""RFC 3986 scheme."""
_TARGET = re.compile(rb"[\x21-\x7e]+")
"""An origin-form request target: visible ASCII, no spaces."""
_AROUND = b" \t"


class RequestRefused(ValueError):
    """The request cannot be sent as asked; ``status`` is what the downstream is answered."""

    status = 400


@dataclass(frozen=True, slots=True)
class RequestHead:
    method: str
    scheme: str
    authority: str
    """``host[:port]`` as received (Latin-1 text of its bytes)."""
    target: str
    """Path and query as received (Latin-1 text of its bytes)."""
    headers: tuple[tuple[str, str], ...]
    """Lower-case names; values are text."""


@dataclass(frozen=True, slots=True)
class EncodedHead:
    """A :class:`RequestHead` in bytes, every field checked."""

    method: bytes
    authority: bytes
    target: bytes
    headers: list[tuple[bytes, bytes]]


def encode_head(head: RequestHead) -> EncodedHead:
    """``head`` in bytes; raises :class:`RequestRefused` naming the first field that cannot be."""
    method = encode_method(head.method)
    target = encode_target(head.target)
    authority = encode_authority(head.authority)
    headers = [encode_header(name, value) for name, value in head.headers]
    return EncodedHead(method, authority, target, headers)


def encode_method(text: str) -> bytes:
    """A method: a token."""
    method = _as_received(text, "method")
    if _TOKEN.fullmatch(method) is None:
        raise RequestRefused(f"method {text!r} is not a token")
    return method


def encode_target(text: str) -> bytes:
    """An origin-form target, the bytes received: visible ASCII, no spaces."""
    target = _as_received(text, "request target")
    if _TARGET.fullmatch(target) is None:
        raise RequestRefused(f"request target {text!r} holds a character it may not")
    return target


def encode_authority(text: str) -> bytes:
    """``host[:port]``, the bytes received, as the ``host`` field value."""
    return _checked_value("host", _as_received(text, "authority"))


def encode_scheme(text: str) -> bytes:
    """A URI scheme (``http``, ``https``)."""
    scheme = text.encode("ascii", "replace")
    if _SCHEME.fullmatch(scheme) is None:
        raise RequestRefused(f"scheme {text!r} is not a URI scheme")
    return scheme


def encode_header(name: str, value: str) -> tuple[bytes, bytes]:
    """A header field: a token for its name, its text value as UTF-8."""
    raw_name = name.encode("ascii", "replace")
    if _TOKEN.fullmatch(raw_name) is None:
        raise RequestRefused(f"header name {name!r} is not a token")
    try:
        raw_value = value.encode()
    except UnicodeEncodeError as exc:
        raise RequestRefused(f"header '{name}' is not text: {exc.reason}") from None
    return raw_name, _checked_value(name, raw_value)


def http1_request(head: RequestHead) -> bytes:
    """The HTTP/1.1 request head, ``host`` first (a request without a body)."""
    encoded = encode_head(head)
    request_headers = [(b"host", encoded.authority), *encoded.headers]
    try:
        request = h11.Request(method=encoded.method, target=encoded.target, headers=request_headers)
        return h11.Connection(h11.CLIENT).send(request) or b""
    except h11.LocalProtocolError as exc:
        raise RequestRefused(f"invalid request: {exc}") from None


def http2_request(head: RequestHead, dropped: frozenset[str]) -> list[tuple[bytes, bytes]]:
    """The HTTP/2 header block, pseudo-header fields first, without the ``dropped`` names."""
    encoded = encode_head(head)
    fields = [
        (b":method", encoded.method),
        (b":scheme", encode_scheme(head.scheme)),
        (b":authority", encoded.authority),
        (b":path", encoded.target),
    ]
    fields.extend((n.lower(), v) for n, v in encoded.headers if n.lower().decode() not in dropped)
    return fields


def _as_received(text: str, what: str) -> bytes:
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        raise RequestRefused(f"{what} {text!r} is not the bytes of a request") from None


def _checked_value(name: str, value: bytes) -> bytes:
    value = value.strip(_AROUND)
    if _FIELD_VALUE.fullmatch(value) is None:
        shown = value.decode("utf-8", "replace")
        raise RequestRefused(
            f"header '{name}' value {shown!r} holds a character a field value may not"
            " (CR, LF, NUL, VT or FF)"
        )
    return value

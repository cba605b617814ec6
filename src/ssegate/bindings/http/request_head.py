"""The head of an upstream request: its fields encoded, checked, and (HTTP/1.1) serialized.

A :class:`RequestHead` holds text. The target and the authority are the bytes a downstream
sent, which the server edges read as Latin-1; they go out as those same bytes. Header values
are text (a resumed event id can be any Unicode) and go out as UTF-8. The spaces and tabs
around a value are dropped, as Fetch does for a browser's request headers, so an id of ``"5 "``
can still be resumed.

What a field value may not hold under RFC 9110 — CR, LF, NUL or other whitespace than a space
or tab between its characters — refuses the request with :class:`RequestRefused` before a byte
is written, for HTTP/1.1 and HTTP/2 alike (h2 checks the fields it receives, not the ones it
sends). The HTTP/1.1 bytes are built by h11, which applies the same rules again and the ones of
the request line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import h11

_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""RFC 9110 token: a method or a field name."""
_FIELD_VALUE = re.compile(rb"(?:[^\x00\s]+(?:[ \t]+[^\x00\s]+)*)?")
"""RFC 9110 field-value, as h11 reads it: visible or non-ASCII bytes, single spaces between."""
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
    method = _as_received(head.method, "method")
    if _TOKEN.fullmatch(method) is None:
        raise RequestRefused(f"method {head.method!r} is not a token")
    target = _as_received(head.target, "request target")
    if _TARGET.fullmatch(target) is None:
        raise RequestRefused(f"request target {head.target!r} holds a character it may not")
    authority = _checked_value("host", _as_received(head.authority, "authority"))
    headers = []
    for name, value in head.headers:
        raw_name = name.encode("ascii", "replace")
        if _TOKEN.fullmatch(raw_name) is None:
            raise RequestRefused(f"header name {name!r} is not a token")
        try:
            raw_value = value.encode()
        except UnicodeEncodeError as exc:
            raise RequestRefused(f"header '{name}' is not text: {exc.reason}") from None
        headers.append((raw_name, _checked_value(name, raw_value)))
    return EncodedHead(method, authority, target, headers)


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
        (b":scheme", head.scheme.encode("ascii", "replace")),
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

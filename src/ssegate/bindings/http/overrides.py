"""The http server's ``options.overrides``: headers set on every request handed to an exit.

Zilla applies them once a route is chosen (routes match the request as it arrived) and passes
the changed request on: ``overrides: {":authority": "otherhost:8181"}`` makes every exit see
that authority. A pseudo-header sets that part of the request line: ``:path`` the target (path
and query), ``:method``, ``:scheme``, ``:authority``; any other name sets that header, replacing
what the client sent. The request as it arrived is what the http server logs and measures.

Every value is checked at start-up (``ssegate validate`` included) by the request writer's own
functions (:mod:`ssegate.bindings.http.request_head`): a value the config accepts is one an
upstream request can carry, and one it cannot is a config error naming its path and the reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from ssegate.bindings.http.request_head import (
    RequestRefused,
    encode_authority,
    encode_header,
    encode_method,
    encode_scheme,
    encode_target,
)
from ssegate.config.errors import ConfigError
from ssegate.contract.exchange import Request

_PSEUDO: dict[str, tuple[str, Callable[[str], bytes]]] = {
    ":path": ("target", encode_target),
    ":method": ("method", encode_method),
    ":scheme": ("scheme", encode_scheme),
    ":authority": ("authority", encode_authority),
}
"""A pseudo-header: the request attribute it sets, and the writer's check of that part."""


class HeaderOverrides:
    """``options.overrides``, checked once at start-up."""

    __slots__ = ("fields", "headers")

    def __init__(self, fields: Mapping[str, str], headers: Mapping[str, str]) -> None:
        self.fields = dict(fields)
        """Request attribute → value, for the pseudo-headers."""
        self.headers = dict(headers)
        """Lower-case header name → value."""

    @classmethod
    def parse(cls, value: Mapping[str, str] | None, path: str) -> HeaderOverrides | None:
        """``None`` when there are none; a name or value that cannot be sent is a ConfigError
        (the schema has made it a mapping of strings)."""
        if value is None:
            return None
        fields: dict[str, str] = {}
        headers: dict[str, str] = {}
        for name, text in value.items():
            where = f"{path}.{name}"
            lowered = str(name).lower()
            if lowered.startswith(":") and lowered not in _PSEUDO:
                raise ConfigError(where, f"use one of {', '.join(_PSEUDO)} or a header name")
            if lowered == ":method":
                text = text.upper()
            if lowered == ":path" and not text.startswith("/"):
                raise ConfigError(where, f"'{text}' does not start with '/'")
            try:
                if lowered in _PSEUDO:
                    attribute, check = _PSEUDO[lowered]
                    check(text)
                    fields[attribute] = text
                else:
                    encode_header(lowered, text)
                    headers[lowered] = text
            except RequestRefused as refused:
                raise ConfigError(where, f"cannot be sent: {refused}") from None
        return cls(fields, headers) if fields or headers else None

    def apply(self, request: Request) -> Request:
        """A copy of ``request`` with the overrides set (``request`` itself is left as it was)."""
        fields = self.fields
        return dataclasses.replace(
            request,
            method=fields.get("method", request.method),
            scheme=fields.get("scheme", request.scheme),
            authority=fields.get("authority", request.authority),
            target=fields.get("target", request.target),
            headers={**request.headers, **self.headers} if self.headers else request.headers,
        )

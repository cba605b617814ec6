"""The http server's ``options.overrides``: headers set on every request handed to an exit.

Zilla applies them once a route is chosen (routes match the request as it arrived) and passes
the changed request on: ``overrides: {":authority": "otherhost:8181"}`` makes every exit see
that authority. A pseudo-header sets that part of the request line: ``:path`` the target (path
and query), ``:method``, ``:scheme``, ``:authority``; any other name sets that header, replacing
what the client sent. The request as it arrived is what the http server logs and measures.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

from ssegate.config.errors import ConfigError
from ssegate.engine.exchange import Request

_PSEUDO = {":path": "target", ":method": "method", ":scheme": "scheme", ":authority": "authority"}
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


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
            if any(c in text for c in "\r\n\0"):
                raise ConfigError(where, "must be one line of text")
            lowered = str(name).lower()
            if lowered.startswith(":"):
                if lowered not in _PSEUDO:
                    raise ConfigError(where, f"use one of {', '.join(_PSEUDO)} or a header name")
                if lowered == ":method" and not _TOKEN.fullmatch(text):
                    raise ConfigError(where, f"'{text}' is not a method")
                if lowered == ":path" and not text.startswith("/"):
                    raise ConfigError(where, f"'{text}' does not start with '/'")
                fields[_PSEUDO[lowered]] = text.upper() if lowered == ":method" else text
            elif not _TOKEN.fullmatch(lowered):
                raise ConfigError(where, f"'{name}' is not a header name")
            else:
                headers[lowered] = text
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

"""The http server's ``access-control`` option: CORS preflights and response headers.

``policy: same-origin`` (the default) adds no CORS headers. A request carrying an ``origin``
that is not the server's own scheme and authority (default ports made explicit, so
``http://example.com`` is the same origin as ``example.com:80``) is refused with 403, and so is
its preflight.

``policy: cross-origin`` lets other origins in, optionally narrowed by ``allow``:

- ``origins``: the allowed origins (``https://app.example.com``; default ports may be written
  or left out). Absent: every origin.
- ``methods`` / ``headers``: what a preflight may ask for. Absent: anything. A configured
  ``headers`` list always also allows ``last-event-id``, which EventSource polyfills send when
  they reconnect. Header names compare case-insensitively; every requested header must be
  allowed (Zilla lets a preflight through when any one of them is).
- ``credentials: true`` answers ``access-control-allow-credentials: true`` on the responses
  themselves; a preflight's 204 does not carry it, as Zilla's does not.

Origins, methods and headers are answered explicitly (the request's own values echoed) when
they were listed or ``credentials`` is on, because browsers ignore ``*`` for credentialed
requests; otherwise with ``*``. An echoed origin comes with ``vary: origin``. ``max-age``
(seconds) is sent on preflights, ``expose.headers`` narrows ``access-control-expose-headers``.
A request without ``origin`` (not a browser's cross-origin request) is answered
``access-control-allow-origin: *`` under ``cross-origin``, as Zilla does.

The preflight follows Zilla even where browsers ask for more: the Fetch standard wants
``access-control-allow-credentials`` on the preflight of a credentialed request with custom
headers, so a browser that sends ``authorization`` with ``withCredentials`` is refused there
by Zilla and by ssegate alike (a plain ``EventSource`` GET has no preflight). One deliberate
difference remains: a wildcard ``access-control-allow-headers`` names ``authorization`` too
when it was requested (the wildcard never covers it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ssegate.config.errors import ConfigError
from ssegate.contract.exchange import Request

SAME_ORIGIN = "same-origin"
CROSS_ORIGIN = "cross-origin"

DEFAULT_PORTS = {"http": 80, "https": 443}

# Response headers a browser shows to scripts anyway (CORS-safelisted), and the ones the
# protocol layer writes itself; Zilla leaves these out of ``access-control-expose-headers``.
SAFELISTED_RESPONSE_HEADERS = frozenset(
    {
        "cache-control",
        "content-language",
        "content-length",
        "content-type",
        "expires",
        "last-modified",
        "pragma",
        "server",
        "date",
    }
)

ALWAYS_ALLOWED_HEADERS = frozenset({"last-event-id"})

Headers = list[tuple[str, str]]


def normalize_origin(origin: str) -> str | None:
    """``scheme://host:port`` with the port always written, or ``None`` if not an origin."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        return None
    host = parts.hostname
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{port or DEFAULT_PORTS[scheme]}"


def _request_origin(request: Request) -> str | None:
    """The origin the request itself was sent to, normalized like :func:`normalize_origin`."""
    return normalize_origin(f"{request.scheme}://{request.authority}")


def _string_list(value: list[str] | None, path: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not all(value):  # the schema takes lists of strings, the empty one too
        raise ConfigError(path, "must be a list of non-empty strings")
    return tuple(value)


@dataclass(frozen=True, slots=True)
class AccessControl:
    """The resolved ``access-control`` option of one http server binding."""

    policy: str = SAME_ORIGIN
    origins: frozenset[str] | None = None
    """Normalized allowed origins; ``None`` allows every origin."""
    methods: frozenset[str] | None = None
    headers: frozenset[str] | None = None
    """Lower-case allowed request headers, ``last-event-id`` included; ``None``: any."""
    credentials: bool = False
    max_age: int | None = None
    expose: frozenset[str] | None = None
    """Lower-case headers to expose; ``None``: every one that is not safelisted."""

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None, path: str) -> AccessControl:
        """Build from the ``access-control`` mapping at YAML path ``path`` (``None``: defaults),
        whose keys and value types the schema has checked."""
        if options is None:
            return cls()
        policy = options.get("policy", SAME_ORIGIN)
        allow = options.get("allow") or {}
        origins = _string_list(allow.get("origins"), f"{path}.allow.origins")
        normalized: set[str] = set()
        for index, origin in enumerate(origins or ()):
            value = normalize_origin(origin)
            if value is None:
                raise ConfigError(
                    f"{path}.allow.origins[{index}]",
                    f"'{origin}' is not an origin like https://app.example.com[:port]",
                )
            normalized.add(value)
        methods = _string_list(allow.get("methods"), f"{path}.allow.methods")
        headers = _string_list(allow.get("headers"), f"{path}.allow.headers")
        credentials = allow.get("credentials", False)
        max_age = options.get("max-age")
        if max_age is not None and not isinstance(max_age, int):  # the schema's integers: 10.0
            raise ConfigError(f"{path}.max-age", "must be a whole number of seconds, 0 or more")
        expose_option = options.get("expose") or {}
        expose = _string_list(expose_option.get("headers"), f"{path}.expose.headers")
        return cls(
            policy=policy,
            origins=frozenset(normalized) if origins is not None else None,
            methods=frozenset(methods) if methods is not None else None,
            headers=(
                frozenset(h.lower() for h in headers) | ALWAYS_ALLOWED_HEADERS
                if headers is not None
                else None
            ),
            credentials=credentials,
            max_age=max_age,
            expose=frozenset(h.lower() for h in expose) if expose is not None else None,
        )

    # -- decisions ---------------------------------------------------------------------------

    def is_same_origin(self, request: Request) -> bool:
        """True when the request's ``origin`` is the scheme and authority it was sent to."""
        origin = request.headers.get("origin")
        if origin is None:
            return False
        normalized = normalize_origin(origin)
        return normalized is not None and normalized == _request_origin(request)

    def allows_origin(self, origin: str) -> bool:
        if self.policy != CROSS_ORIGIN:
            return False
        if self.origins is None:
            return True
        normalized = normalize_origin(origin)
        return normalized is not None and normalized in self.origins

    def allows_request(self, request: Request) -> bool:
        """Whether a (non-preflight) request may be served; refused ones are answered 403.

        Requests without ``origin`` and same-origin requests always may.
        """
        origin = request.headers.get("origin")
        return origin is None or self.is_same_origin(request) or self.allows_origin(origin)

    def _explicit_origin(self) -> bool:
        return self.credentials or self.origins is not None

    def _allow_origin_headers(self, origin: str) -> Headers:
        if self._explicit_origin():
            return [("access-control-allow-origin", origin)]
        return [("access-control-allow-origin", "*")]

    def preflight(self, request: Request) -> tuple[int, Headers] | None:
        """Answer a CORS preflight: ``(204, headers)``, ``(403, [])``, or ``None`` if not one.

        A preflight is an ``OPTIONS`` request with ``origin`` and
        ``access-control-request-method`` or ``access-control-request-headers``.
        """
        if request.method != "OPTIONS":
            return None
        origin = request.headers.get("origin")
        method = request.headers.get("access-control-request-method")
        requested = request.headers.get("access-control-request-headers")
        if origin is None or (method is None and requested is None):
            return None
        if self.is_same_origin(request):
            return 204, []
        if not self.allows_origin(origin):
            return 403, []
        if method is not None and self.methods is not None and method not in self.methods:
            return 403, []
        names = _header_list(requested or "")
        if self.headers is not None and any(name.lower() not in self.headers for name in names):
            return 403, []
        headers = self._allow_origin_headers(origin)
        if method is not None:
            explicit = self.credentials or self.methods is not None
            headers.append(("access-control-allow-methods", method if explicit else "*"))
        if names:
            headers.append(("access-control-allow-headers", self._allow_headers_value(names)))
        if self.max_age is not None:
            headers.append(("access-control-max-age", str(self.max_age)))
        if self._explicit_origin():
            headers.append(("vary", "origin"))
        return 204, headers

    def _allow_headers_value(self, names: Sequence[str]) -> str:
        if self.credentials or self.headers is not None:
            return ", ".join(names)
        if any(name.lower() == "authorization" for name in names):
            return "*, authorization"
        return "*"

    def response_headers(
        self, request: Request, response: Iterable[tuple[str, str]] = ()
    ) -> Headers:
        """CORS headers to add to a normal response to ``request``.

        ``response`` is the response's own headers: they decide what
        ``access-control-expose-headers`` names. Nothing is added for same-origin requests or
        under the same-origin policy. A request without ``origin`` gets
        ``access-control-allow-origin: *`` under the cross-origin policy, as Zilla answers it.
        """
        if self.policy != CROSS_ORIGIN:
            return []
        origin = request.headers.get("origin")
        if origin is None:
            headers = [("access-control-allow-origin", "*")]
        elif self.is_same_origin(request) or not self.allows_origin(origin):
            return []
        else:
            headers = self._allow_origin_headers(origin)
        if self.credentials:
            headers.append(("access-control-allow-credentials", "true"))
        exposable = [
            name
            for name, _ in response
            if not name.startswith(":")
            and name.lower() not in SAFELISTED_RESPONSE_HEADERS
            and (self.expose is None or name.lower() in self.expose)
        ]
        if exposable:
            if self.credentials or self.expose is not None:
                unique = list(dict.fromkeys(name.lower() for name in exposable))
                headers.append(("access-control-expose-headers", ", ".join(unique)))
            else:
                headers.append(("access-control-expose-headers", "*"))
        if origin is not None and self._explicit_origin():
            headers.append(("vary", "origin"))
        return headers


def _header_list(value: str) -> list[str]:
    """``"X-Api-Key, last-event-id"`` → ``["X-Api-Key", "last-event-id"]``."""
    return [name.strip() for name in value.split(",") if name.strip()]

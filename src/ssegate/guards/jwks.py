"""A guard's key set: inline JWKs from the config, or a JWKS document fetched over HTTP(S).

An inline set never changes. A remote set starts empty and is fetched when a token names a
``kid`` it does not hold (the first token after start-up included), so a JWKS that is down at
start-up delays nothing but the tokens that need it. Fetches are bounded: at most one at a time,
and a new one no sooner than :data:`REFETCH_INTERVAL` seconds after the last success (so a
stream of tokens with a made-up ``kid`` cannot turn the gateway into a load generator against
the issuer), or :data:`RETRY_INTERVAL` seconds after a failure. A failed fetch keeps the keys
already held.

Keys are also refetched once they are :data:`KEYS_MAX_AGE` seconds old, in the background
while the old ones keep verifying, so a key the issuer withdraws stops being accepted within
that time even if no token ever names an unknown ``kid``.

The download itself is plain ``urllib`` in a worker thread (a few KiB, rarely): the only I/O
in the guard. Documents over :data:`MAX_JWKS_BYTES` are refused; a key in the document that
cannot be used (unknown ``kty``, RSA without ``alg``, ``use`` other than ``sig``) is skipped and
logged, the others are kept.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
import urllib.request
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ssegate.guards.jwt import JwtKey
from ssegate.telemetry import log

MAX_JWKS_BYTES = 1024 * 1024
FETCH_TIMEOUT = 5.0
REFETCH_INTERVAL = 10.0
RETRY_INTERVAL = 1.0
KEYS_MAX_AGE = 300.0

Fetch = Callable[[str], Awaitable[bytes]]


def parse_jwks(document: Any, *, source: str = "jwks") -> dict[str, JwtKey]:
    """The usable signing keys of a JWKS document, by ``kid``; raises ``ValueError`` if none."""
    if not isinstance(document, Mapping) or not isinstance(document.get("keys"), list):
        raise ValueError("a JWKS must be a JSON object with a 'keys' list")
    keys: dict[str, JwtKey] = {}
    for index, jwk in enumerate(document["keys"]):
        if not isinstance(jwk, Mapping) or jwk.get("use", "sig") != "sig":
            continue
        try:
            key = JwtKey.from_jwk(jwk)
        except ValueError as exc:
            log.warning("guard.jwks_key_skipped", source=source, index=index, reason=str(exc))
            continue
        keys[key.kid] = key
    return keys


async def download(url: str) -> bytes:
    """GET ``url`` (TLS verified against the system's trust store), at most 1 MiB."""

    def get() -> bytes:
        request = urllib.request.Request(url, headers={"accept": "application/json"})
        context = ssl.create_default_context() if url.startswith("https:") else None
        with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT, context=context) as response:
            body: bytes = response.read(MAX_JWKS_BYTES + 1)
        if len(body) > MAX_JWKS_BYTES:
            raise ValueError(f"the JWKS is larger than {MAX_JWKS_BYTES} bytes")
        return body

    return await asyncio.to_thread(get)


class KeySet:
    """The keys a guard verifies with, by ``kid``."""

    def __init__(
        self,
        keys: Mapping[str, JwtKey] | None = None,
        *,
        url: str | None = None,
        fetch: Fetch = download,
        refetch_interval: float = REFETCH_INTERVAL,
        retry_interval: float = RETRY_INTERVAL,
        max_age: float = KEYS_MAX_AGE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._keys: dict[str, JwtKey] = dict(keys or {})
        self.url = url
        self._fetch = fetch
        self._refetch_interval = refetch_interval
        self._retry_interval = retry_interval
        self._max_age = max_age
        self._clock = clock
        self._stale_at = float("inf")
        """When the fetched keys are due for a background refetch (never before a fetch)."""
        self._next_fetch = float("-inf")
        self._fetching: asyncio.Future[None] | None = None
        self.last_error: str | None = None
        """Why the last fetch failed; ``None`` after a success."""

    def __len__(self) -> int:
        return len(self._keys)

    def key(self, kid: str) -> JwtKey | None:
        if self._clock() >= self._stale_at:
            self._refresh_in_background()
        return self._keys.get(kid)

    def _refresh_in_background(self) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop (a synchronous caller): the next caller in one will
            return
        self._stale_at = float("inf")  # one background refetch at a time
        self.refresh()

    def refresh(self) -> asyncio.Future[None] | None:
        """A fetch to wait for before looking an unknown ``kid`` up again, or ``None``.

        ``None`` for an inline set, or when a fetch happened too recently to start another.
        The future never fails: a failed fetch is logged and kept in :attr:`last_error`.
        """
        if self.url is None:
            return None
        if self._fetching is not None and not self._fetching.done():
            return self._fetching
        if self._clock() < self._next_fetch:
            return None
        self._fetching = asyncio.ensure_future(self._refetch(self.url))
        return self._fetching

    async def _refetch(self, url: str) -> None:
        try:
            body = await asyncio.wait_for(self._fetch(url), FETCH_TIMEOUT + 1)
            keys = parse_jwks(json.loads(body), source=url)
        except Exception as exc:  # any failure leaves the old keys in place
            self.last_error = f"{type(exc).__name__}: {exc}"[:300]
            self._next_fetch = self._clock() + self._retry_interval
            if self._keys:  # keep the old keys, and try again once the retry interval is over
                self._stale_at = self._next_fetch
            log.warning("guard.jwks_fetch_failed", url=url, error=self.last_error)
            return
        withdrawn = sorted(set(self._keys) - set(keys))
        self._keys = keys
        self.last_error = None
        self._next_fetch = self._clock() + self._refetch_interval
        self._stale_at = self._clock() + self._max_age
        log.event("guard.jwks_fetched", url=url, keys=len(keys), withdrawn=withdrawn)

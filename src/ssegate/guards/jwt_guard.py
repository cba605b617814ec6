"""The built ``jwt`` guard: a key set, the claim rules, and a cache of verified tokens.

:meth:`JwtGuard.authenticate` is synchronous: it parses and verifies a token against the keys
held now and returns the :class:`~ssegate.guards.jwt.JwtIdentity`, or raises
:class:`~ssegate.guards.jwt.TokenRejected`. When the only problem is a ``kid`` the set does not
hold, :meth:`JwtGuard.key_refresh` gives a fetch to wait for (remote key sets only, at a bounded
rate) before trying once more; the http server does that without blocking the connection.

Verified tokens are cached by their text until their ``exp`` (a reconnect or a challenge
answer with the same token costs a dict lookup, not a signature check); the cache holds at most
:data:`CACHE_SIZE` tokens and drops expired ones first when full.

Options (Zilla's): ``issuer``, ``audience``, ``keys`` (a list of JWKs or a JWKS URL; default
``<issuer>/.well-known/jwks.json``), ``challenge`` (seconds before ``exp`` to send the
challenge event), ``identity`` (claim, default ``sub``), ``roles`` (claim path, default
``scope``), ``attributes`` (name → claim path).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from ssegate.config.errors import ConfigError
from ssegate.config.model import Component
from ssegate.guards.jwks import KeySet
from ssegate.guards.jwt import ClaimsPolicy, JwtIdentity, JwtKey, TokenRejected, parse_token
from ssegate.guards.jwt import verify_signature as _verify_signature
from ssegate.guards.streams import GuardedStreams

CACHE_SIZE = 16384


class JwtGuard:
    """One ``jwt`` guard of the config."""

    def __init__(
        self,
        name: str,
        keys: KeySet,
        policy: ClaimsPolicy,
        *,
        challenge: float = 0.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.name = name
        self.keys = keys
        self.policy = policy
        self.challenge = challenge
        """Seconds before ``exp`` at which a guarded stream is sent the challenge event."""
        self.clock = clock
        self.streams = GuardedStreams(name)
        """The streams this guard keeps authorized (challenges, answers, the end at ``exp``)."""
        self._verified: dict[str, JwtIdentity] = {}

    def authenticate(self, token: str) -> JwtIdentity:
        """The identity ``token`` establishes now; raises :class:`TokenRejected`."""
        now = self.clock()
        cached = self._verified.get(token)
        if cached is not None:
            if now < cached.expires_at + self.policy.leeway:
                return cached
            del self._verified[token]
            raise TokenRejected("token has expired")
        parsed = parse_token(token)
        _verify_signature(parsed, self.keys.key(parsed.kid))
        identity = self.policy.check(parsed.claims, now)
        self._remember(token, identity, now)
        return identity

    def key_refresh(self) -> asyncio.Future[None] | None:
        """A key-set fetch worth waiting for after an unknown ``kid``, or ``None``."""
        return self.keys.refresh()

    def _remember(self, token: str, identity: JwtIdentity, now: float) -> None:
        verified = self._verified
        if len(verified) >= CACHE_SIZE:
            for cached_token in [t for t, i in verified.items() if i.expires_at <= now]:
                del verified[cached_token]
            while len(verified) >= CACHE_SIZE:
                del verified[next(iter(verified))]  # the oldest entry
        verified[token] = identity


def build(component: Component, _ctx: Any = None) -> JwtGuard:
    """Build a guard from its config; raises :class:`ConfigError` naming the YAML path."""
    options = component.options or {}
    where = f"{component.path or 'guards.' + component.name}.options"
    issuer = options.get("issuer")
    keys_option = options.get("keys")  # the schema's: a list of JWKs or an http(s) URL
    if isinstance(keys_option, list):
        inline: dict[str, JwtKey] = {}
        for index, jwk in enumerate(keys_option):
            try:
                key = JwtKey.from_jwk(jwk)
            except ValueError as exc:
                raise ConfigError(f"{where}.keys[{index}]", str(exc)) from None
            if key.kid in inline:
                raise ConfigError(f"{where}.keys[{index}].kid", f"kid {key.kid!r} appears twice")
            inline[key.kid] = key
        keys = KeySet(inline)
    elif isinstance(keys_option, str):
        keys = KeySet(url=keys_option)
    else:
        if not isinstance(issuer, str) or not issuer.startswith(("https://", "http://")):
            raise ConfigError(
                f"{where}.keys", "without keys, issuer must be an http(s) URL to find the JWKS"
            )
        keys = KeySet(url=issuer.rstrip("/") + "/.well-known/jwks.json")
    attributes = options.get("attributes") or {}
    policy = ClaimsPolicy(
        issuer=issuer,
        audience=options.get("audience"),
        identity=str(options.get("identity") or "sub"),
        roles=str(options.get("roles") or "scope"),
        attributes={str(k): str(v) for k, v in attributes.items()},
    )
    challenge = options.get("challenge", 0)  # the schema's: a whole number of seconds, 0 or more
    return JwtGuard(component.name, keys, policy, challenge=float(challenge))

"""The ``jwt`` guard: a key set, the claim rules, and a cache of verified tokens.

:class:`JwtGuard` is a :class:`~ssegate.contract.guard.Guard`: :meth:`JwtGuard.authorize` takes
the token a request carries and answers the :class:`~ssegate.contract.identity.Identity` it
establishes (``sub``, the roles claim, the configured attributes, ``exp``, and the challenge
time ``exp - challenge``) or a :class:`~ssegate.contract.identity.CredentialsRejected` with the
reason. When the only problem is a ``kid`` the set does not hold, the rejection is
``refreshable`` and :meth:`JwtGuard.refresh` gives a fetch to wait for (remote key sets only,
at a bounded rate) before authorizing once more; the http server does that without blocking
the connection. Refusals name the ``Bearer`` scheme (RFC 6750).

:meth:`JwtGuard.authenticate` is the same check in JWT terms, for tools and benchmarks: it
returns the :class:`~ssegate.guards.jwt.JwtIdentity` or raises
:class:`~ssegate.guards.jwt.TokenRejected`. Nothing outside ``guards/jwt*.py`` needs those.

Verified tokens are cached by their text until their ``exp`` (a reconnect or a challenge
answer with the same token costs a dict lookup, not a signature check); the cache holds at most
:data:`CACHE_SIZE` tokens and drops expired ones first when full.

Options (Zilla's): ``issuer``, ``audience``, ``keys`` (a list of JWKs or a JWKS URL; default
``<issuer>/.well-known/jwks.json``), ``challenge`` (seconds before ``exp`` to send the
challenge event), ``identity`` (claim, default ``sub``), ``roles`` (claim path, default
``scope``), ``attributes`` (name → claim path). A token needs ``exp`` (Zilla would take one
without as never expiring); it needs its identity claim only where the config reads the
identity (:mod:`~ssegate.guards.identity_use`), and Zilla never asks for it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from ssegate.config.errors import ConfigError
from ssegate.config.model import Component
from ssegate.contract.identity import Authorization, CredentialsRejected, Identity
from ssegate.guards.guard import GuardContext
from ssegate.guards.identity_use import identity_readers
from ssegate.guards.jwks import KeySet
from ssegate.guards.jwt import ClaimsPolicy, JwtIdentity, JwtKey, TokenRejected, parse_token
from ssegate.guards.jwt import verify_signature as _verify_signature
from ssegate.guards.streams import GuardedStreams

CACHE_SIZE = 16384

_Verified = tuple[JwtIdentity, Identity]
"""A verified token in both terms: the JWT's own, and the guard-neutral one."""


class JwtGuard:
    """One ``jwt`` guard of the config."""

    scheme = "Bearer"

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
        self._verified: dict[str, _Verified] = {}

    def authorize(self, credentials: str) -> Authorization:
        """The identity the token ``credentials`` establishes now, or why it does not."""
        try:
            return self._verify(credentials)[1]
        except TokenRejected as exc:
            reason = exc.reason
            unknown_kid = exc.unknown_kid is not None
            if unknown_kid and self.keys.last_error:
                reason += f" (the key set could not be fetched: {self.keys.last_error})"
            return CredentialsRejected(reason, refreshable=unknown_kid)

    def refresh(self) -> asyncio.Future[None] | None:
        """A key-set fetch worth waiting for after an unknown ``kid``, or ``None``."""
        return self.keys.refresh()

    def authenticate(self, token: str) -> JwtIdentity:
        """The JWT identity ``token`` establishes now; raises :class:`TokenRejected`."""
        return self._verify(token)[0]

    def _verify(self, token: str) -> _Verified:
        now = self.clock()
        cached = self._verified.get(token)
        if cached is not None:
            if now < cached[0].expires_at + self.policy.leeway:
                return cached
            del self._verified[token]
            raise TokenRejected("token has expired")
        parsed = parse_token(token)
        _verify_signature(parsed, self.keys.key(parsed.kid))
        claims = self.policy.check(parsed.claims, now)
        verified = (claims, self._identity(claims))
        self._remember(token, verified, now)
        return verified

    def _identity(self, claims: JwtIdentity) -> Identity:
        exp = claims.expires_at
        return Identity(
            claims.identity,
            claims.roles,
            claims.attributes,
            expires_at=exp,
            challenge_at=exp - self.challenge if self.challenge > 0 else exp,
        )

    def _remember(self, token: str, verified: _Verified, now: float) -> None:
        cache = self._verified
        if len(cache) >= CACHE_SIZE:
            for cached_token in [t for t, v in cache.items() if v[0].expires_at <= now]:
                del cache[cached_token]
            while len(cache) >= CACHE_SIZE:
                del cache[next(iter(cache))]  # the oldest entry
        cache[token] = verified


def build(component: Component, ctx: GuardContext | None = None) -> JwtGuard:
    """Build a guard from its config; raises :class:`ConfigError` naming the YAML path.

    A token without the identity claim is accepted (empty identity, as in Zilla) when the
    config (``ctx``) reads the guard's identity nowhere; without a config it is refused."""
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
    readers = [] if ctx is None else identity_readers(ctx.config, component.name)
    policy = ClaimsPolicy(
        issuer=issuer,
        audience=options.get("audience"),
        identity=str(options.get("identity") or "sub"),
        roles=str(options.get("roles") or "scope"),
        attributes={str(k): str(v) for k, v in attributes.items()},
        identity_required=ctx is None or bool(readers),
        identity_read_at=readers[0] if readers else "",
    )
    challenge = options.get("challenge", 0)  # the schema's: a whole number of seconds, 0 or more
    return JwtGuard(component.name, keys, policy, challenge=float(challenge))

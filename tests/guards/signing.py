"""Keys and tokens for guard tests: one RSA, one EC and one Ed25519 key per test session."""

from __future__ import annotations

import functools
from typing import Any

from ssegate.tools.token import PrivateKey, generate_key, mint, public_jwk

ISSUER = "https://auth.example.com"
AUDIENCE = "https://api.example.com"


@functools.cache
def key(kind: str) -> PrivateKey:
    return generate_key(kind)


def jwks() -> list[dict[str, str]]:
    """The public keys a test guard holds: kids ``rsa``, ``ec``, ``ed``."""
    return [
        public_jwk(key("rsa"), "rsa"),
        public_jwk(key("ec"), "ec"),
        public_jwk(key("ed25519"), "ed"),
    ]


def token(
    *,
    sub: str = "alice",
    scope: str = "proxy:stream",
    ttl: float = 60,
    kid: str = "ec",
    **overrides: Any,
) -> str:
    kind = {"rsa": "rsa", "ec": "ec", "ed": "ed25519"}.get(kid, "ec")
    options: dict[str, Any] = {"iss": ISSUER, "aud": AUDIENCE, **overrides}
    return mint(key(kind), kid=kid, sub=sub, scope=scope, ttl=ttl, **options)

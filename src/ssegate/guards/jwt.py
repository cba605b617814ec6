"""JSON Web Tokens: parsing, signature verification and claim checks, with no I/O.

A token is checked in this order, and the first failure is a :class:`TokenRejected` whose
``reason`` is safe to log and to send back (it never contains the token):

1. shape (RFC 7515 compact form): at most :data:`MAX_TOKEN_BYTES`, three segments, each
   base64url without padding, header and claims UTF-8 JSON objects nested at most
   :data:`MAX_JSON_DEPTH` deep (checked before the JSON is parsed), without ``NaN`` or
   ``Infinity``;
2. header: ``alg`` is one of :data:`ALGORITHMS` (asymmetric only: ``none`` and ``HS*`` are
   refused), ``kid`` is a string of at most :data:`MAX_KID_CHARS`, ``typ`` (if any) a string, no
   ``crit`` extensions (none are understood, RFC 7515 §4.1.11);
3. key: ``kid`` names a known key (else ``unknown_kid`` is set, so the caller may refetch its
   key set) and the token's ``alg`` is the key's own ``alg`` (no algorithm confusion);
4. signature;
5. claims: the registered ones have their RFC 7519 types when present (``iss`` and ``sub``
   strings, ``aud`` a string or a list of strings, ``exp``, ``nbf`` and ``iat`` finite numbers
   of seconds no later than the year 9999); ``iss`` and ``aud`` match when the guard names
   them; ``exp`` is required and not past, ``nbf`` not future, and ``iat`` not future either (a
   token issued in the future is refused). The one clock-skew allowance,
   :attr:`ClaimsPolicy.leeway`, applies to all three.

Parsing is total: whatever the token holds, the outcome is an identity or a
:class:`TokenRejected`, never another exception.

:class:`JwtKey` is a public JWK made ready to verify (RSA for RS256/384/512 and PS256/384/512,
EC P-256/P-384/P-521 for ES256/384/512, OKP Ed25519/Ed448 for EdDSA). :class:`ClaimsPolicy`
turns verified claims into a :class:`JwtIdentity`: the identity claim (default ``sub``), the
roles at a dotted claim path (default ``scope``; a space-separated string or a list) and the
configured attributes.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

MAX_TOKEN_BYTES = 8192
MAX_JSON_DEPTH = 16
"""How deep the header's or the claims' JSON may nest (the object itself is level 1)."""
MAX_KID_CHARS = 256
MAX_TIME = 253402300799.0
"""The latest ``exp``, ``nbf`` or ``iat`` taken: 9999-12-31T23:59:59Z."""
_B64URL = re.compile(r"[A-Za-z0-9_-]*")
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_JSON_BRACKET = re.compile(r"[\[\]{}]")
_SHOWN_CHARS = 40

_HASHES: dict[str, Callable[[], hashes.HashAlgorithm]] = {
    "256": hashes.SHA256,
    "384": hashes.SHA384,
    "512": hashes.SHA512,
}
_CURVES: dict[str, tuple[Callable[[], ec.EllipticCurve], str, int]] = {
    # crv → (curve, the only alg it signs, bytes per coordinate)
    "P-256": (ec.SECP256R1, "ES256", 32),
    "P-384": (ec.SECP384R1, "ES384", 48),
    "P-521": (ec.SECP521R1, "ES512", 66),
}
ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
"""The JWS algorithms accepted: asymmetric only."""


class TokenRejected(Exception):
    """A token that does not authenticate; ``reason`` is safe to log and to answer with."""

    def __init__(self, reason: str, *, unknown_kid: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.unknown_kid = unknown_kid
        """Set when the only problem so far is a ``kid`` missing from the key set."""


def b64url_decode(text: str, *, lenient: bool = False) -> bytes:
    """Base64url without padding (RFC 7515 §2). ``lenient`` also takes ``+/`` and ``=`` (JWKs)."""
    if lenient:
        text = text.strip().rstrip("=").replace("+", "-").replace("/", "_")
    if not _B64URL.fullmatch(text) or len(text) % 4 == 1:
        raise ValueError("not base64url without padding")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise ValueError("not base64url without padding") from None


def b64url_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _int(jwk: Mapping[str, Any], name: str) -> int:
    value = jwk.get(name)
    if not isinstance(value, str) or not value:
        raise ValueError(f"'{name}' is missing")
    return int.from_bytes(b64url_decode(value, lenient=True), "big")


def _bytes(jwk: Mapping[str, Any], name: str) -> bytes:
    value = jwk.get(name)
    if not isinstance(value, str) or not value:
        raise ValueError(f"'{name}' is missing")
    return b64url_decode(value, lenient=True)


Verifier = Callable[[bytes, bytes], None]
"""``verify(signature, signing_input)``; raises ``InvalidSignature``."""


@dataclass(frozen=True, slots=True)
class JwtKey:
    """A public JWK ready to verify signatures made with its one algorithm."""

    kid: str
    alg: str
    kty: str
    verify: Verifier = field(repr=False, compare=False)

    @classmethod
    def from_jwk(cls, jwk: Mapping[str, Any]) -> JwtKey:
        """Parse a public JWK; raises ``ValueError`` saying what is wrong with it.

        A JWK without ``alg`` gets the algorithm its type implies when there is exactly one
        (EC curves, OKP); an RSA key must name its ``alg``, since RS* and PS* share keys.
        """
        kid = jwk.get("kid")
        if not isinstance(kid, str) or not kid:
            raise ValueError("'kid' is missing")
        kty = jwk.get("kty")
        alg = jwk.get("alg")
        if alg is not None and alg not in ALGORITHMS:
            raise ValueError(f"alg {alg!r} is not one of {', '.join(sorted(ALGORITHMS))}")
        if kty == "RSA":
            if alg is None or alg[:2] not in ("RS", "PS"):
                raise ValueError("an RSA key needs 'alg' RS256/384/512 or PS256/384/512")
            public = rsa.RSAPublicNumbers(_int(jwk, "e"), _int(jwk, "n")).public_key()
            if public.key_size < 2048:
                raise ValueError(f"an RSA key of {public.key_size} bits is too short (2048+)")
            return cls(kid, alg, kty, _rsa_verifier(public, alg))
        if kty == "EC":
            crv = jwk.get("crv")
            if crv not in _CURVES:
                raise ValueError(f"crv {crv!r} is not one of {', '.join(_CURVES)}")
            curve, curve_alg, size = _CURVES[str(crv)]
            if alg is not None and alg != curve_alg:
                raise ValueError(f"curve {crv} signs {curve_alg}, not {alg}")
            ec_public = ec.EllipticCurvePublicNumbers(
                _int(jwk, "x"), _int(jwk, "y"), curve()
            ).public_key()
            return cls(kid, curve_alg, kty, _ec_verifier(ec_public, curve_alg, size))
        if kty == "OKP":
            crv = jwk.get("crv")
            if alg is not None and alg != "EdDSA":
                raise ValueError(f"an OKP key signs EdDSA, not {alg}")
            raw = _bytes(jwk, "x")
            okp: ed25519.Ed25519PublicKey | ed448.Ed448PublicKey
            if crv == "Ed25519":
                okp = ed25519.Ed25519PublicKey.from_public_bytes(raw)
            elif crv == "Ed448":
                okp = ed448.Ed448PublicKey.from_public_bytes(raw)
            else:
                raise ValueError(f"crv {crv!r} is not Ed25519 or Ed448")
            return cls(kid, "EdDSA", kty, okp.verify)
        raise ValueError(f"kty {kty!r} is not RSA, EC or OKP")


def _rsa_verifier(public: rsa.RSAPublicKey, alg: str) -> Verifier:
    digest = _HASHES[alg[2:]]

    def verify(signature: bytes, data: bytes) -> None:
        if alg.startswith("PS"):
            pss = padding.PSS(mgf=padding.MGF1(digest()), salt_length=digest().digest_size)
            public.verify(signature, data, pss, digest())
        else:
            public.verify(signature, data, padding.PKCS1v15(), digest())

    return verify


def _ec_verifier(public: ec.EllipticCurvePublicKey, alg: str, size: int) -> Verifier:
    algorithm = ec.ECDSA(_HASHES[alg[2:]]())

    def verify(signature: bytes, data: bytes) -> None:
        if len(signature) != 2 * size:  # JWS carries r || s, fixed width (RFC 7518 §3.4)
            raise InvalidSignature()
        r = int.from_bytes(signature[:size], "big")
        s = int.from_bytes(signature[size:], "big")
        public.verify(encode_dss_signature(r, s), data, algorithm)

    return verify


@dataclass(frozen=True, slots=True)
class ParsedToken:
    header: dict[str, Any]
    claims: dict[str, Any]
    signing_input: bytes
    signature: bytes

    @property
    def kid(self) -> str:
        return str(self.header["kid"])

    @property
    def alg(self) -> str:
        return str(self.header["alg"])


def _shown(value: object) -> str:
    """``value`` as a reason may quote it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


def _nesting(text: str) -> int:
    """How deep the JSON ``text`` nests (strings skipped); stops counting past the limit."""
    depth = deepest = 0
    for bracket in _JSON_BRACKET.findall(_JSON_STRING.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        deepest = max(deepest, depth)
        if deepest > MAX_JSON_DEPTH:
            break
    return deepest


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _json_segment(segment: str, what: str) -> dict[str, Any]:
    try:
        text = b64url_decode(segment).decode("utf-8")
    except ValueError:
        raise TokenRejected(f"token {what} is not base64url UTF-8") from None
    if _nesting(text) > MAX_JSON_DEPTH:
        raise TokenRejected(f"token {what} JSON nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except ValueError:  # also numbers of more digits than Python converts
        raise TokenRejected(f"token {what} is not JSON") from None
    if not isinstance(value, dict):
        raise TokenRejected(f"token {what} is not a JSON object")
    return value


def parse_token(token: str) -> ParsedToken:
    """Check a compact JWS's shape and header; raises :class:`TokenRejected`."""
    if len(token) > MAX_TOKEN_BYTES:
        raise TokenRejected(f"token is longer than {MAX_TOKEN_BYTES} bytes")
    if not token.isascii():
        raise TokenRejected("token is not ASCII")
    parts = token.split(".")
    if len(parts) != 3:
        raise TokenRejected("token is not three dot-separated segments")
    header = _json_segment(parts[0], "header")
    alg = header.get("alg")
    if not isinstance(alg, str) or alg not in ALGORITHMS:
        raise TokenRejected(f"token alg {_shown(alg)} is not accepted (asymmetric algorithms only)")
    kid = header.get("kid")
    if not isinstance(kid, str) or not kid:
        raise TokenRejected("token header has no kid")
    if len(kid) > MAX_KID_CHARS:
        raise TokenRejected(f"token kid is longer than {MAX_KID_CHARS} characters")
    if "typ" in header and not isinstance(header["typ"], str):
        raise TokenRejected("token typ is not a string")
    if "crit" in header:
        raise TokenRejected("token header has crit extensions, none are understood")
    claims = _json_segment(parts[1], "claims")
    try:
        signature = b64url_decode(parts[2])
    except ValueError:
        raise TokenRejected("token signature is not base64url") from None
    return ParsedToken(header, claims, f"{parts[0]}.{parts[1]}".encode(), signature)


def verify_signature(parsed: ParsedToken, key: JwtKey | None) -> None:
    """Raises :class:`TokenRejected` unless ``key`` signed ``parsed`` with its own alg."""
    if key is None:
        raise TokenRejected(
            f"token kid {parsed.kid!r} is not in the key set", unknown_kid=parsed.kid
        )
    if parsed.alg != key.alg:
        raise TokenRejected(f"token alg {parsed.alg} is not key {key.kid!r}'s alg {key.alg}")
    try:
        key.verify(parsed.signature, parsed.signing_input)
    except (InvalidSignature, ValueError):
        raise TokenRejected("token signature does not verify") from None


@dataclass(frozen=True, slots=True)
class JwtIdentity:
    """What a verified token establishes; ``request.identities[guard]`` holds one."""

    identity: str
    attributes: dict[str, str]
    roles: frozenset[str]
    expires_at: float
    """``exp``, seconds since the epoch."""
    issued_at: float | None = None


def _at_path(claims: Mapping[str, Any], path: str) -> Any:
    value: Any = claims
    if path in claims:
        return claims[path]
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _time(claims: Mapping[str, Any], name: str) -> float | None:
    """The time claim ``name`` in seconds, ``None`` when absent; refuses anything else."""
    value = claims.get(name)
    if value is None and name not in claims:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        if isinstance(value, int) and abs(value) <= MAX_TIME:
            return float(value)
        if isinstance(value, float) and math.isfinite(value) and abs(value) <= MAX_TIME:
            return value
    raise TokenRejected(f"token {name} is not a number of seconds up to the year 9999")


def _check_types(claims: Mapping[str, Any]) -> None:
    """Refuse registered claims of the wrong type (RFC 7519 §4.1)."""
    for name in ("iss", "sub"):
        if name in claims and not isinstance(claims[name], str):
            raise TokenRejected(f"token {name} is not a string")
    aud = claims.get("aud", "")
    if not isinstance(aud, str) and not (
        isinstance(aud, list) and all(isinstance(item, str) for item in aud)
    ):
        raise TokenRejected("token aud is not a string or a list of strings")


@dataclass(frozen=True, slots=True)
class ClaimsPolicy:
    """The guard's claim rules: who issues, for whom, and where identity and roles live."""

    issuer: str | None = None
    audience: str | None = None
    identity: str = "sub"
    roles: str = "scope"
    attributes: dict[str, str] = field(default_factory=dict)
    """Attribute name → claim path."""
    leeway: float = 0.0
    """Seconds of clock skew tolerated on ``exp``, ``nbf`` and ``iat``."""

    def check(self, claims: Mapping[str, Any], now: float) -> JwtIdentity:
        """The identity the claims establish at ``now``; raises :class:`TokenRejected`."""
        _check_types(claims)
        if self.issuer is not None and claims.get("iss") != self.issuer:
            raise TokenRejected("token iss is not the guard's issuer")
        if self.audience is not None:
            aud = claims.get("aud")
            audiences = aud if isinstance(aud, list) else [aud]
            if self.audience not in audiences:
                raise TokenRejected("token aud does not include the guard's audience")
        exp, nbf, iat = _time(claims, "exp"), _time(claims, "nbf"), _time(claims, "iat")
        if exp is None:
            raise TokenRejected("token has no numeric exp")
        if now >= exp + self.leeway:
            raise TokenRejected("token has expired")
        if nbf is not None and now + self.leeway < nbf:
            raise TokenRejected("token is not valid yet (nbf)")
        if iat is not None and now + self.leeway < iat:
            raise TokenRejected("token is issued in the future (iat)")
        identity = _at_path(claims, self.identity)
        if not isinstance(identity, str | int) or isinstance(identity, bool) or identity == "":
            raise TokenRejected(f"token has no {self.identity!r} claim")
        attributes: dict[str, str] = {}
        for name, path in self.attributes.items():
            value = _at_path(claims, path)
            if value is not None:
                attributes[name] = value if isinstance(value, str) else json.dumps(value)
        return JwtIdentity(
            identity=str(identity),
            attributes=attributes,
            roles=roles_of(_at_path(claims, self.roles)),
            expires_at=exp,
            issued_at=iat,
        )


def roles_of(value: Any) -> frozenset[str]:
    """Roles from a claim: a space-separated string or a list of strings; else none."""
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list):
        return frozenset(item for item in value if isinstance(item, str))
    return frozenset()

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
4. signature, checked by PyJWT (see below);
5. claims: the registered ones have their RFC 7519 types when present (``iss`` and ``sub``
   strings, ``aud`` a string or a list of strings, ``exp``, ``nbf`` and ``iat`` finite numbers
   of seconds no later than the year 9999); ``iss`` and ``aud`` match when the guard names
   them; the identity claim is required unless nothing reads it
   (:attr:`ClaimsPolicy.identity_required`); ``exp`` is required and not past, ``nbf`` not
   future, and ``iat`` not future either (a token issued in the future is refused). The one
   clock-skew allowance, :attr:`ClaimsPolicy.leeway`, applies to all three.

Parsing is total: whatever the token holds, the outcome is an identity or a
:class:`TokenRejected`, never another exception.

:class:`JwtKey` is a public JWK made ready to verify (RSA for RS256/384/512 and PS256/384/512,
EC P-256/P-384/P-521 for ES256/384/512, OKP Ed25519/Ed448 for EdDSA). :class:`ClaimsPolicy`
turns verified claims into a :class:`JwtIdentity`: the identity claim (default ``sub``), the
roles at a dotted claim path (default ``scope``; a space-separated string or a list) and the
configured attributes.

The cryptography is PyJWT's (``PyJWT[crypto]``, on ``cryptography``): ``PyJWK`` turns the
JWK's public members into a key bound to one algorithm, and that algorithm's ``verify`` checks
the signature, so the token's own ``alg`` never chooses the code that verifies it. This module
is the policy around it: the JWK's members are checked and put in canonical form before PyJWT
reads them (its decoder skips characters outside the base64 alphabet where this module refuses
them, and it wants EC coordinates at full width), steps 1 to 3 run before the signature is
checked and step 5 after. ``PyJWS.decode_complete`` is not used: it would parse the token a
second time (base64url with a per-character check in Python, the header's JSON), adding no
check once steps 1 to 3 have passed and some 25 µs to every verification.

PyJWT rather than joserfc, after reading both. Either would do the cryptography. A ``PyJWK`` is
one object holding the public key and its one algorithm, the shape this module needs (a key
decides its alg). joserfc keeps keys and algorithms apart and joins them per token through a
registry looked up by the header's ``alg``, whose defaults (a header of at most 512 bytes,
registered header names only, a warning on every EdDSA verification) would need overriding to
keep the rules above. PyJWT is also the most widely deployed JWT library for Python, and needs
nothing beyond ``cryptography``.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jwt import PyJWK, PyJWTError

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

_CURVES: dict[str, tuple[str, int]] = {
    # crv → (the only alg it signs, bytes per coordinate)
    "P-256": ("ES256", 32),
    "P-384": ("ES384", 48),
    "P-521": ("ES512", 66),
}
_OKP_CURVES = ("Ed25519", "Ed448")
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


def _shown(value: object) -> str:
    """``value`` as a reason may quote it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


def _member(jwk: Mapping[str, Any], name: str, width: int | None = None) -> str:
    """The JWK member ``name`` as canonical base64url, ``width`` bytes wide when given.

    Standard base64 (``+/``, ``=`` padding) is taken too, as some issuers publish it.
    """
    value = jwk.get(name)
    if not isinstance(value, str) or not value:
        raise ValueError(f"'{name}' is missing")
    raw = b64url_decode(value, lenient=True)
    if width is not None:
        if len(raw) > width:
            raise ValueError(f"'{name}' is longer than {width} bytes")
        raw = raw.rjust(width, b"\0")  # some issuers drop leading zero bytes
    return b64url_encode(raw)


def _public_members(jwk: Mapping[str, Any], kty: object, alg: str | None) -> dict[str, str]:
    """The public JWK PyJWT is to read: ``kty``, the one ``alg`` and the key's own members."""
    if kty == "RSA":
        if alg is None or alg[:2] not in ("RS", "PS"):
            raise ValueError("an RSA key needs 'alg' RS256/384/512 or PS256/384/512")
        return {"kty": kty, "alg": alg, "n": _member(jwk, "n"), "e": _member(jwk, "e")}
    crv = jwk.get("crv")
    if kty == "EC":
        if not isinstance(crv, str) or crv not in _CURVES:
            raise ValueError(f"crv {_shown(crv)} is not one of {', '.join(_CURVES)}")
        curve_alg, width = _CURVES[crv]
        if alg is not None and alg != curve_alg:
            raise ValueError(f"curve {crv} signs {curve_alg}, not {alg}")
        x, y = _member(jwk, "x", width), _member(jwk, "y", width)
        return {"kty": kty, "alg": curve_alg, "crv": crv, "x": x, "y": y}
    if kty == "OKP":
        if alg is not None and alg != "EdDSA":
            raise ValueError(f"an OKP key signs EdDSA, not {alg}")
        if not isinstance(crv, str) or crv not in _OKP_CURVES:
            raise ValueError(f"crv {_shown(crv)} is not Ed25519 or Ed448")
        return {"kty": kty, "alg": "EdDSA", "crv": crv, "x": _member(jwk, "x")}
    raise ValueError(f"kty {_shown(kty)} is not RSA, EC or OKP")


@dataclass(frozen=True, slots=True)
class JwtKey:
    """A public JWK ready to verify signatures made with its one algorithm."""

    kid: str
    alg: str
    kty: str
    jwk: PyJWK = field(repr=False, compare=False)
    """PyJWT's key, bound to :attr:`alg`."""

    @classmethod
    def from_jwk(cls, jwk: Mapping[str, Any]) -> JwtKey:
        """Parse a public JWK; raises ``ValueError`` saying what is wrong with it.

        A JWK without ``alg`` gets the algorithm its type implies when there is exactly one
        (EC curves, OKP); an RSA key must name its ``alg``, since RS* and PS* share keys.
        Private members (``d`` and the like) are ignored: only the public key is built.
        """
        kid = jwk.get("kid")
        if not isinstance(kid, str) or not kid:
            raise ValueError("'kid' is missing")
        kty = jwk.get("kty")
        alg = jwk.get("alg")
        if alg is not None and (not isinstance(alg, str) or alg not in ALGORITHMS):
            raise ValueError(f"alg {_shown(alg)} is not one of {', '.join(sorted(ALGORITHMS))}")
        public = _public_members(jwk, kty, alg)
        try:
            key = PyJWK.from_dict(public, public["alg"])
        except PyJWTError as exc:
            raise ValueError(f"not a usable {kty} public key: {exc}") from None
        if kty == "RSA" and key.key.key_size < 2048:
            raise ValueError(f"an RSA key of {key.key.key_size} bits is too short (2048+)")
        return cls(kid, public["alg"], public["kty"], key)


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
        verified = key.jwk.Algorithm.verify(parsed.signing_input, key.jwk.key, parsed.signature)
    except (PyJWTError, ValueError):  # PyJWT refuses; a malformed signature may be a ValueError
        verified = False
    if not verified:
        raise TokenRejected("token signature does not verify")


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
    identity_required: bool = True
    """Refuse a token without the identity claim. When ``False`` (nothing in the config reads
    the identity: :mod:`ssegate.guards.identity_use`), such a token has the empty identity, as
    in Zilla."""
    identity_read_at: str = ""
    """Where the config reads the identity (a YAML path), named in the refusal."""

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
        if identity in (None, "") and not self.identity_required:
            identity = ""
        elif not isinstance(identity, str | int) or isinstance(identity, bool) or identity == "":
            reader = f", which {self.identity_read_at} reads" if self.identity_read_at else ""
            raise TokenRejected(f"token has no {self.identity!r} claim{reader}")
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

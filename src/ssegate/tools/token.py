"""``ssegate token``: make keys, publish their JWKS and sign JWTs, for development and tests.

- ``ssegate token keygen --type rsa|ec|ed25519 --out FILE`` writes a PEM private key;
- ``ssegate token jwks --key FILE --kid K [--alg A]`` prints the public JWKS (JSON);
- ``ssegate token --key FILE --kid K [--sub S] [--scope "a b"] [--ttl 300] [--iss U] [--aud U]
  [--alg A] [--claim NAME=VALUE ...]`` prints a signed token; each ``--claim`` adds a claim whose
  value is parsed as JSON when it is valid JSON (``n=5``, ``roles=["a","b"]``) and is taken as a
  string otherwise (``tenant=acme``).

The algorithm defaults to the key's natural one: RS256 for RSA, ES256/ES384/ES512 for the
P-256/P-384/P-521 curves, EdDSA for Ed25519. The same functions serve tests and the demo.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from ssegate.guards.jwt import b64url_encode

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey

_CURVE_ALGS = {"secp256r1": ("ES256", "P-256", 32), "secp384r1": ("ES384", "P-384", 48)}
_CURVE_ALGS["secp521r1"] = ("ES512", "P-521", 66)
_DIGESTS: dict[str, type[hashes.SHA256 | hashes.SHA384 | hashes.SHA512]] = {
    "256": hashes.SHA256,
    "384": hashes.SHA384,
    "512": hashes.SHA512,
}


def generate_key(kind: str) -> PrivateKey:
    """A fresh private key: ``rsa`` (2048 bits), ``ec`` (P-256) or ``ed25519``."""
    if kind == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if kind == "ec":
        return ec.generate_private_key(ec.SECP256R1())
    if kind == "ed25519":
        return ed25519.Ed25519PrivateKey.generate()
    raise ValueError(f"key type {kind!r} is not rsa, ec or ed25519")


def private_pem(key: PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def load_private_key(path: Path) -> PrivateKey:
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(
        key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey
    ):
        raise ValueError(f"{path}: not an RSA, EC or Ed25519 private key")
    return key


def default_alg(key: PrivateKey) -> str:
    if isinstance(key, rsa.RSAPrivateKey):
        return "RS256"
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return _CURVE_ALGS[key.curve.name][0]
    return "EdDSA"


def _uint(value: int, size: int | None = None) -> str:
    length = size if size is not None else max(1, (value.bit_length() + 7) // 8)
    return b64url_encode(value.to_bytes(length, "big"))


def public_jwk(key: PrivateKey, kid: str, alg: str | None = None) -> dict[str, str]:
    """The public JWK of ``key``, with ``kid``, ``alg`` and ``use: sig``."""
    alg = alg or default_alg(key)
    if isinstance(key, rsa.RSAPrivateKey):
        numbers = key.public_key().public_numbers()
        return {"kty": "RSA", "n": _uint(numbers.n), "e": _uint(numbers.e), "alg": alg,
                "kid": kid, "use": "sig"}  # fmt: skip
    if isinstance(key, ec.EllipticCurvePrivateKey):
        _, crv, size = _CURVE_ALGS[key.curve.name]
        point = key.public_key().public_numbers()
        return {"kty": "EC", "crv": crv, "x": _uint(point.x, size), "y": _uint(point.y, size),
                "alg": alg, "kid": kid, "use": "sig"}  # fmt: skip
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return {"kty": "OKP", "crv": "Ed25519", "x": b64url_encode(raw), "alg": alg, "kid": kid,
            "use": "sig"}  # fmt: skip


def private_jwk(key: PrivateKey, kid: str, alg: str | None = None) -> dict[str, str]:
    """The private JWK of an RSA or EC key (what WebCrypto's ``importKey('jwk')`` takes)."""
    jwk = public_jwk(key, kid, alg)
    if isinstance(key, rsa.RSAPrivateKey):
        n = key.private_numbers()
        jwk.update(d=_uint(n.d), p=_uint(n.p), q=_uint(n.q), dp=_uint(n.dmp1),
                   dq=_uint(n.dmq1), qi=_uint(n.iqmp))  # fmt: skip
    elif isinstance(key, ec.EllipticCurvePrivateKey):
        jwk["d"] = _uint(key.private_numbers().private_value, _CURVE_ALGS[key.curve.name][2])
    else:
        raise ValueError("only RSA and EC keys have a WebCrypto private JWK here")
    return jwk


def sign(key: PrivateKey, signing_input: bytes, alg: str) -> bytes:
    """The JWS signature of ``signing_input`` with ``key`` under ``alg``."""
    if isinstance(key, rsa.RSAPrivateKey):
        digest = _DIGESTS[alg[2:]]()
        if alg.startswith("PS"):
            pss = padding.PSS(mgf=padding.MGF1(digest), salt_length=digest.digest_size)
            return key.sign(signing_input, pss, digest)
        return key.sign(signing_input, padding.PKCS1v15(), digest)
    if isinstance(key, ec.EllipticCurvePrivateKey):
        size = _CURVE_ALGS[key.curve.name][2]
        der = key.sign(signing_input, ec.ECDSA(_DIGESTS[alg[2:]]()))
        r, s = decode_dss_signature(der)
        return r.to_bytes(size, "big") + s.to_bytes(size, "big")
    return key.sign(signing_input)


def encode_token(
    key: PrivateKey, claims: dict[str, Any], *, kid: str | None, alg: str | None = None
) -> str:
    """A compact JWS of ``claims`` (``kid=None`` leaves the header without ``kid``)."""
    alg = alg or default_alg(key)
    header: dict[str, str] = {"alg": alg, "typ": "JWT"}
    if kid is not None:
        header["kid"] = kid
    head = b64url_encode(json.dumps(header, separators=(",", ":")).encode())
    body = b64url_encode(json.dumps(claims, separators=(",", ":")).encode())
    signing_input = f"{head}.{body}".encode()
    return f"{head}.{body}.{b64url_encode(sign(key, signing_input, alg))}"


def mint(
    key: PrivateKey,
    *,
    kid: str,
    sub: str = "developer",
    scope: str = "",
    ttl: float = 300,
    iss: str | None = None,
    aud: str | None = None,
    alg: str | None = None,
    now: float | None = None,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """A token for ``sub`` with ``scope``, expiring ``ttl`` seconds from ``now``.

    ``extra`` claims are added last, so they replace a standard claim of the same name.
    """
    issued = time.time() if now is None else now
    claims: dict[str, Any] = {"sub": sub, "iat": int(issued), "exp": int(issued + ttl)}
    if scope:
        claims["scope"] = scope
    if iss is not None:
        claims["iss"] = iss
    if aud is not None:
        claims["aud"] = aud
    claims.update(extra or {})
    return encode_token(key, claims, kid=kid, alg=alg)


def add_token_parser(commands: Any) -> None:
    token = commands.add_parser(
        "token",
        help="sign a development JWT, print a JWKS, or make a key",
        description="Sign a JWT with a PEM private key and print it. 'token jwks' prints the"
        " public JWKS of a key; 'token keygen' writes a new private key.",
    )
    _key_options(token)
    token.add_argument("--sub", default="developer", help="subject (default developer)")
    token.add_argument("--scope", default="", help='space-separated roles, "proxy:stream"')
    token.add_argument("--ttl", type=float, default=300.0, help="seconds to expiry (300)")
    token.add_argument("--iss", default=None, help="issuer claim")
    token.add_argument("--aud", default=None, help="audience claim")
    token.add_argument(
        "--claim",
        action="append",
        type=_claim,
        default=[],
        metavar="NAME=VALUE",
        help="another claim, repeatable; VALUE is JSON when it parses as JSON (5, true,"
        ' ["a","b"]), else a string',
    )
    token.set_defaults(func=_sign_command, token_parser=token)
    tools = token.add_subparsers(title="tools", metavar="TOOL")
    jwks = tools.add_parser("jwks", help="print the public JWKS of a private key")
    _key_options(jwks)
    jwks.set_defaults(func=_jwks_command, token_parser=jwks)
    keygen = tools.add_parser("keygen", help="write a new PEM private key")
    keygen.add_argument("--type", choices=["rsa", "ec", "ed25519"], default="ec")
    keygen.add_argument("--out", type=Path, required=True, metavar="FILE")
    keygen.set_defaults(func=_keygen_command)


def _claim(text: str) -> tuple[str, Any]:
    """``NAME=VALUE`` → ``(NAME, VALUE as JSON, or as the string when it is not JSON)``."""
    name, equals, raw = text.partition("=")
    if not equals or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    return name, value


def _key_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--key", type=Path, metavar="FILE", help="PEM private key")
    parser.add_argument("--kid", help="key id written into the token header / JWK")
    parser.add_argument("--alg", default=None, help="JWS alg (default: the key's own)")


def _load(args: argparse.Namespace) -> PrivateKey | None:
    if args.key is None or not args.kid:
        args.token_parser.error("--key and --kid are required")
    try:
        return load_private_key(args.key)
    except (OSError, ValueError, TypeError) as exc:
        print(f"ssegate: cannot read the key: {exc}", file=sys.stderr)
        return None


def _sign_command(args: argparse.Namespace) -> int:
    key = _load(args)
    if key is None:
        return 2
    print(mint(key, kid=args.kid, sub=args.sub, scope=args.scope, ttl=args.ttl,
               iss=args.iss, aud=args.aud, alg=args.alg, extra=dict(args.claim)))  # fmt: skip
    return 0


def _jwks_command(args: argparse.Namespace) -> int:
    key = _load(args)
    if key is None:
        return 2
    print(json.dumps({"keys": [public_jwk(key, args.kid, args.alg)]}, indent=2))
    return 0


def _keygen_command(args: argparse.Namespace) -> int:
    out: Path = args.out
    out.write_bytes(private_pem(generate_key(args.type)))
    out.chmod(0o600)
    print(f"wrote {args.type} private key to {out}")
    return 0

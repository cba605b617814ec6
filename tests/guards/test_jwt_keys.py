"""Public JWKs made ready to verify: what ``JwtKey.from_jwk`` takes, mends and refuses.

The key itself is PyJWT's; these are the checks and repairs ssegate makes before PyJWT reads
a JWK, and the verification that follows with the key it built.
"""

from __future__ import annotations

import json
import time

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, rsa

from ssegate.guards.jwks import KeySet
from ssegate.guards.jwt import ClaimsPolicy, JwtKey, b64url_decode, b64url_encode
from ssegate.guards.jwt_guard import JwtGuard
from ssegate.tools.token import encode_token, private_jwk, public_jwk

from .signing import key


def claims() -> dict[str, object]:
    return {"sub": "alice", "exp": int(time.time()) + 60}


def guard(jwk: JwtKey) -> JwtGuard:
    return JwtGuard("g", KeySet({jwk.kid: jwk}), ClaimsPolicy())


def segment(value: object) -> str:
    return b64url_encode(json.dumps(value).encode())


@pytest.mark.parametrize(
    ("jwk", "reason"),
    [
        ({"kid": "k", "kty": "EC", "crv": "P-256", "alg": ["ES256"]}, "alg ['ES256'] is not"),
        ({"kid": "k", "kty": "EC", "crv": ["P-256"]}, "crv ['P-256'] is not one of"),
        ({"kid": "k", "kty": "OKP", "crv": {"Ed25519": 1}}, "crv {'Ed25519': 1} is not"),
        ({"kid": "k", "kty": ["RSA"], "alg": "RS256"}, "kty ['RSA'] is not RSA, EC or OKP"),
        ({"kid": "k", "kty": "OKP", "crv": "Ed25519", "x": 7}, "'x' is missing"),
    ],
    ids=["alg-list", "crv-list", "crv-object", "kty-list", "x-number"],
)
def test_a_jwk_member_of_the_wrong_json_type_is_a_value_error(
    jwk: dict[str, object], reason: str
) -> None:
    with pytest.raises(ValueError, match=reason.replace("[", r"\[").replace("{", r"\{")):
        JwtKey.from_jwk(jwk)


def test_an_ec_coordinate_without_its_leading_zero_byte_is_read_at_full_width() -> None:
    for _ in range(20_000):  # about one P-256 key in 128 has a coordinate below 2**248
        private = ec.generate_private_key(ec.SECP256R1())
        jwk = public_jwk(private, "short")
        short = [name for name in ("x", "y") if b64url_decode(jwk[name])[0] == 0]
        if short:
            break
    else:
        pytest.fail("no P-256 key with a leading zero byte in a coordinate")
    jwk[short[0]] = b64url_encode(b64url_decode(jwk[short[0]])[1:])
    signed = encode_token(private, claims(), kid="short")
    assert guard(JwtKey.from_jwk(jwk)).authenticate(signed).identity == "alice"


@pytest.mark.parametrize("kind", ["rsa", "ec"])
def test_the_private_members_of_a_jwk_are_ignored(kind: str) -> None:
    jwk = JwtKey.from_jwk(private_jwk(key(kind), "k"))
    assert guard(jwk).authenticate(encode_token(key(kind), claims(), kid="k")).identity == "alice"


def test_an_ed448_key_verifies_eddsa_tokens() -> None:
    private = ed448.Ed448PrivateKey.generate()
    raw = private.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    jwk = JwtKey.from_jwk({"kty": "OKP", "crv": "Ed448", "x": b64url_encode(raw), "kid": "448"})
    assert (jwk.alg, jwk.kty) == ("EdDSA", "OKP")
    signing_input = f"{segment({'alg': 'EdDSA', 'kid': '448'})}.{segment(claims())}"
    signed = f"{signing_input}.{b64url_encode(private.sign(signing_input.encode()))}"
    assert guard(jwk).authenticate(signed).identity == "alice"


def test_an_rsa_key_under_2048_bits_is_refused() -> None:
    short = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    with pytest.raises(ValueError, match="an RSA key of 1024 bits is too short"):
        JwtKey.from_jwk(public_jwk(short, "short"))


def test_an_ec_key_whose_point_is_not_on_its_curve_is_refused() -> None:
    jwk = public_jwk(key("ec"), "k")
    jwk["y"] = jwk["x"]
    with pytest.raises(ValueError, match="not a usable EC public key"):
        JwtKey.from_jwk(jwk)

"""The jwt guard's verification, pure: accepted algorithms, claims, roles, and an attack corpus.

Every attack is refused with a :class:`TokenRejected` whose reason names the problem and never
contains the token.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import time
from pathlib import Path

import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from hypothesis import given, settings
from hypothesis import strategies as st

from ssegate.config.errors import ConfigError
from ssegate.config.model import Component
from ssegate.guards.jwks import KeySet
from ssegate.guards.jwt import ClaimsPolicy, JwtKey, TokenRejected, b64url_encode, roles_of
from ssegate.guards.jwt_guard import JwtGuard, build
from ssegate.tools.token import encode_token, public_jwk

from .signing import AUDIENCE, ISSUER, jwks, key, token

SEED_000 = Path(__file__).resolve().parents[1] / "config" / "fixtures" / "sse-proxy.zilla.yaml"


def guard(**policy: object) -> JwtGuard:
    keys = KeySet({k.kid: k for k in (JwtKey.from_jwk(j) for j in jwks())})
    options = {"issuer": ISSUER, "audience": AUDIENCE, **policy}
    return JwtGuard("authn_jwt", keys, ClaimsPolicy(**options))  # type: ignore[arg-type]


def segment(value: object) -> str:
    return b64url_encode(json.dumps(value).encode())


def claims(**extra: object) -> dict[str, object]:
    now = int(time.time())
    return {"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "exp": now + 60, **extra}


def rejected(token_text: str, g: JwtGuard | None = None) -> str:
    with pytest.raises(TokenRejected) as caught:
        (g or guard()).authenticate(token_text)
    assert not token_text or token_text not in caught.value.reason
    return caught.value.reason


@pytest.mark.parametrize("kid", ["rsa", "ec", "ed"])
def test_a_token_signed_by_a_known_key_gives_identity_and_roles(kid: str) -> None:
    identity = guard().authenticate(token(kid=kid, scope="proxy:stream read"))
    assert identity.identity == "alice"
    assert identity.roles == {"proxy:stream", "read"}


@pytest.mark.parametrize("alg", ["RS384", "RS512", "PS256"])
def test_rsa_keys_verify_the_alg_their_jwk_names(alg: str) -> None:
    keys = KeySet({"r": JwtKey.from_jwk(public_jwk(key("rsa"), "r", alg))})
    g = JwtGuard("g", keys, ClaimsPolicy())
    signed = encode_token(key("rsa"), claims(), kid="r", alg=alg)
    assert g.authenticate(signed).identity == "alice"
    other = "RS256" if alg != "RS256" else "PS256"
    assert "alg" in rejected(encode_token(key("rsa"), claims(), kid="r", alg=other), g)


def test_alg_none_is_refused() -> None:
    unsigned = f"{segment({'alg': 'none', 'kid': 'ec'})}.{segment(claims())}."
    assert "alg 'none' is not accepted" in rejected(unsigned)


def test_hs256_signed_with_the_rsa_public_key_as_secret_is_refused() -> None:
    secret = (
        key("rsa")
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    signing_input = f"{segment({'alg': 'HS256', 'kid': 'rsa'})}.{segment(claims())}"
    mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    assert "alg 'HS256' is not accepted" in rejected(f"{signing_input}.{b64url_encode(mac)}")


def test_a_token_without_kid_is_refused() -> None:
    assert rejected(encode_token(key("ec"), claims(), kid=None)) == "token header has no kid"


def test_an_unknown_kid_is_refused_and_flagged_for_a_key_refetch() -> None:
    with pytest.raises(TokenRejected) as caught:
        guard().authenticate(encode_token(key("ec"), claims(), kid="rotated"))
    assert caught.value.unknown_kid == "rotated"


def test_an_ec_kid_with_an_rs_alg_is_refused() -> None:
    forged = encode_token(key("rsa"), claims(), kid="ec", alg="RS256")
    assert rejected(forged) == "token alg RS256 is not key 'ec''s alg ES256"


def test_an_expired_token_is_refused() -> None:
    assert rejected(token(ttl=-1)) == "token has expired"


def test_a_token_whose_nbf_is_in_the_future_is_refused() -> None:
    early = encode_token(key("ec"), claims(nbf=int(time.time()) + 30), kid="ec")
    assert rejected(early) == "token is not valid yet (nbf)"


def test_a_token_issued_in_the_future_is_refused() -> None:
    now = int(time.time())
    future = encode_token(key("ec"), claims(iat=now + 3600), kid="ec")
    assert rejected(future) == "token is issued in the future (iat)"
    assert guard().authenticate(encode_token(key("ec"), claims(iat=now), kid="ec")).issued_at


def test_iat_nbf_and_exp_share_the_one_clock_skew_leeway() -> None:
    now = time.time()
    policy = ClaimsPolicy(leeway=60)
    assert policy.check(claims(iat=now + 59, nbf=now + 59, exp=now - 59), now).issued_at
    with pytest.raises(TokenRejected, match="issued in the future"):
        policy.check(claims(iat=now + 61), now)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=12,
)
HEADER = (
    st.fixed_dictionaries({}, optional={name: JSON for name in ("alg", "kid", "typ", "crit")})
    | JSON
)
CLAIMS = (
    st.fixed_dictionaries(
        {},
        optional={
            name: JSON | st.integers(min_value=-(10**400), max_value=10**400)
            for name in ("exp", "nbf", "iat", "iss", "aud", "sub", "scope")
        },
    )
    | JSON
)


@settings(max_examples=300, deadline=None)
@given(header=HEADER, payload=CLAIMS)
def test_any_header_and_claims_give_an_identity_or_a_rejection(
    header: object, payload: object
) -> None:
    g = guard()
    unsigned = f"{segment(header)}.{segment(payload)}.AAAA"
    with pytest.raises(TokenRejected):
        g.authenticate(unsigned)
    if isinstance(payload, dict):
        g = JwtGuard("g", g.keys, ClaimsPolicy())
        with contextlib.suppress(TokenRejected):  # signed, so the claim checks run too
            g.authenticate(encode_token(key("ec"), payload, kid="ec"))


@pytest.mark.parametrize("opening", ["[", '{"a":'])
@pytest.mark.parametrize("where", ["header", "claims"])
def test_json_nested_past_the_limit_is_refused_before_parsing(opening: str, where: str) -> None:
    deep = (opening * (5000 // len(opening))).encode()
    parts = {"header": segment({"alg": "ES256", "kid": "ec"}), "claims": segment(claims())}
    parts[where] = b64url_encode(deep)
    reason = rejected(f"{parts['header']}.{parts['claims']}.AAAA")
    assert reason == f"token {where} JSON nests deeper than 16 levels"


def test_json_nested_to_the_limit_with_brackets_in_strings_is_parsed() -> None:
    nested: object = "[{]}"
    for _ in range(14):
        nested = [nested]
    signed = encode_token(key("ec"), claims(deep=nested), kid="ec")
    assert guard().authenticate(signed).identity == "alice"


def test_a_token_without_exp_is_refused() -> None:
    timeless = claims()
    del timeless["exp"]
    assert rejected(encode_token(key("ec"), timeless, kid="ec")) == "token has no numeric exp"


def test_a_wrong_issuer_is_refused() -> None:
    assert "iss" in rejected(token(iss="https://evil.example.com"))


@pytest.mark.parametrize("aud", [None, "https://other.example.com", ["https://x.example.com"]])
def test_a_missing_or_wrong_audience_is_refused(aud: object) -> None:
    payload = claims(aud=aud)
    if aud is None:
        del payload["aud"]
    assert "aud" in rejected(encode_token(key("ec"), payload, kid="ec"))


def test_an_audience_list_that_includes_ours_is_accepted() -> None:
    signed = encode_token(key("ec"), claims(aud=["x", AUDIENCE]), kid="ec")
    assert guard().authenticate(signed).identity == "alice"


@pytest.mark.parametrize("kid", ["rsa", "ec", "ed"])
def test_a_flipped_signature_byte_is_refused(kid: str) -> None:
    head, body, signature = token(kid=kid).split(".")
    flipped = signature[:10] + ("A" if signature[10] != "A" else "B") + signature[11:]
    assert rejected(f"{head}.{body}.{flipped}") == "token signature does not verify"


def test_a_changed_claim_is_refused() -> None:
    head, _, signature = token().split(".")
    forged = f"{head}.{segment(claims(sub='mallory'))}.{signature}"
    assert rejected(forged) == "token signature does not verify"


@pytest.mark.parametrize(
    "mangle",
    [
        lambda t: t.rsplit(".", 1)[0],  # two segments
        lambda t: t[: len(t) // 2],  # cut in the middle
        lambda t: t + ".extra",  # four segments
        lambda t: "!!!." + t.split(".", 1)[1],  # non-base64 header
        lambda t: t.split(".")[0] + ".e30=." + t.split(".")[2],  # padding
        lambda t: t.replace(".", ".\u00e9", 1),  # not ASCII
        lambda t: t[:-3],  # truncated signature
        lambda t: "",
    ],
    ids=[
        "two-segments",
        "cut",
        "four-segments",
        "non-base64",
        "padded",
        "non-ascii",
        "truncated-signature",
        "empty",
    ],
)
def test_truncated_and_non_base64_tokens_are_refused(mangle: object) -> None:
    assert callable(mangle)
    rejected(mangle(token()))


def test_a_token_over_8_kib_is_refused_before_decoding() -> None:
    large = encode_token(key("ec"), claims(pad="x" * 9000), kid="ec")
    assert rejected(large) == "token is longer than 8192 bytes"


def test_crit_headers_are_refused() -> None:
    signing_input = f"{segment({'alg': 'ES256', 'kid': 'ec', 'crit': ['exp']})}.{segment(claims())}"
    assert "crit" in rejected(signing_input + ".AAAA")


def test_header_and_claims_must_be_json_objects() -> None:
    assert (
        rejected(f"{segment([1])}.{segment(claims())}.AAAA") == "token header is not a JSON object"
    )


def test_roles_come_from_a_claim_path_as_a_list_or_a_string() -> None:
    g = guard(roles="realm.roles", identity="email", attributes={"tenant": "org.id"})
    payload = claims(email="a@example.com", realm={"roles": ["r1", "r2", 3]}, org={"id": "acme"})
    identity = g.authenticate(encode_token(key("ec"), payload, kid="ec"))
    assert (identity.identity, identity.roles) == ("a@example.com", {"r1", "r2"})
    assert identity.attributes == {"tenant": "acme"}
    assert roles_of("a  b") == {"a", "b"} and roles_of(None) == frozenset()


def test_verified_tokens_are_cached_until_they_expire() -> None:
    now = [time.time()]
    g = guard()
    g.clock = lambda: now[0]
    signed = token(ttl=10)
    first = g.authenticate(signed)
    assert g.authenticate(signed) is first
    now[0] += 11
    assert rejected(signed, g) == "token has expired"


def test_seed_000_guard_builds_with_its_standard_base64_rsa_modulus() -> None:
    document = yaml.safe_load(SEED_000.read_text())
    options = document["guards"]["authn_jwt"]["options"]
    built = build(Component("authn_jwt", "jwt", options, "guards.authn_jwt"))
    assert built.challenge == 10
    assert built.keys.key("example") is not None and built.keys.key("example_ec") is not None


def test_a_bad_inline_key_is_a_config_error_naming_its_path() -> None:
    options = {"issuer": ISSUER, "keys": [{"kty": "EC", "crv": "P-256", "kid": "k", "x": "AA"}]}
    with pytest.raises(ConfigError) as caught:
        build(Component("g", "jwt", options, "guards.g"))
    assert caught.value.path == "guards.g.options.keys[0]"


def test_without_keys_the_jwks_url_is_under_the_issuer() -> None:
    built = build(Component("g", "jwt", {"issuer": ISSUER + "/"}, "guards.g"))
    assert built.keys.url == f"{ISSUER}/.well-known/jwks.json"

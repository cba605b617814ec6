"""JWTs from a hostile client or issuer: an identity or a ``TokenRejected``, never another error.

``tests/guards/test_jwt.py`` already feeds arbitrary header and claims JSON through unsigned
and signed tokens. These targets go where that one does not: token text that is not three
base64url segments of JSON (arbitrary strings, segments of arbitrary bytes, of almost-JSON, of
JSON that is not an object), one-character edits of a valid signed token, and signed tokens
whose header carries arbitrary values beside a valid ``alg`` and ``kid``, checked by a guard
whose identity, roles and attributes sit at arbitrary claim paths. A refusal's reason is one
line that never contains the token.
"""

from __future__ import annotations

import json
import time

from hypothesis import assume, given
from hypothesis import strategies as st

from ssegate.guards.jwks import KeySet
from ssegate.guards.jwt import ClaimsPolicy, JwtIdentity, JwtKey, TokenRejected, b64url_encode
from ssegate.guards.jwt_guard import JwtGuard
from ssegate.tools.token import encode_token, generate_key, public_jwk, sign

from .profiles import FUZZ

KEY = generate_key("ec")
KEYS = KeySet({"ec": JwtKey.from_jwk(public_jwk(KEY, "ec"))})
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**30), 10**30) | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=16,
)
ALMOST_JSON = st.lists(
    st.sampled_from(["{", "}", "[", "]", '"', ":", ",", "1e999", "NaN", "-", "\\u", "\\", "ä"])
    | st.text(max_size=3),
    max_size=20,
).map("".join)
SEGMENT_BYTES = st.one_of(
    JSON.map(lambda v: json.dumps(v).encode()),
    ALMOST_JSON.map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.binary(max_size=40),
)
SEGMENTS = st.one_of(
    SEGMENT_BYTES.map(b64url_encode),
    st.text(alphabet="ABCabc012-_=+/ .", max_size=12),
    st.text(max_size=8),
)
TOKENS = st.one_of(
    st.text(max_size=60),
    st.lists(SEGMENTS, min_size=1, max_size=5).map(".".join),
)


def guard(**policy: object) -> JwtGuard:
    return JwtGuard("fuzz_jwt", KEYS, ClaimsPolicy(**policy))  # type: ignore[arg-type]


def outcome(g: JwtGuard, token: str) -> JwtIdentity | str:
    """The identity, or the reason the token was refused (checked to be safe to answer)."""
    try:
        return g.authenticate(token)
    except TokenRejected as exc:
        assert exc.reason and "\n" not in exc.reason and "\r" not in exc.reason
        assert len(token) < 8 or token not in exc.reason
        return exc.reason


@FUZZ
@given(token=TOKENS)
def test_any_token_text_gives_an_identity_or_a_rejection(token: str) -> None:
    assert isinstance(outcome(guard(), token), str)  # nothing unsigned gets through


def _valid() -> str:
    claims = {"sub": "alice", "scope": "read", "exp": int(time.time()) + 600}
    return encode_token(KEY, claims, kid="ec")


@FUZZ
@given(
    at=st.integers(0, 10_000),
    edit=st.sampled_from(["replace", "insert", "remove"]),
    char=st.sampled_from("AQgw_-=.+/ \x00ä") | st.characters(),
)
def test_one_character_edits_of_a_valid_token_are_refused_or_change_nothing(
    at: int, edit: str, char: str
) -> None:
    token = _valid()
    at %= len(token)
    if edit == "replace":
        edited = token[:at] + char + token[at + 1 :]
    elif edit == "insert":
        edited = token[:at] + char + token[at:]
    else:
        edited = token[:at] + token[at + 1 :]
    assume(edited != token)
    result = outcome(guard(), edited)
    if isinstance(result, JwtIdentity):
        # Only an edit that decodes to the same bytes (the unused low bits of the last
        # base64url character of a segment) may still verify, and then it is the same token.
        assert result.identity == "alice"


PATHS = st.sampled_from(["sub", "scope", "a.b", "roles", "", ".", "a..b", "tenant"]) | st.text(
    max_size=6
)


@FUZZ
@given(
    extra=st.dictionaries(st.text(max_size=6), JSON, max_size=4),
    claims=st.dictionaries(
        st.sampled_from(["sub", "scope", "a", "roles", "tenant", "aud", "iss", "nbf", "iat"])
        | st.text(max_size=4),
        JSON,
        max_size=6,
    ),
    identity=PATHS,
    roles=PATHS,
    attribute=PATHS,
)
def test_signed_tokens_with_arbitrary_header_values_and_claim_paths_never_break_the_guard(
    extra: dict[str, object],
    claims: dict[str, object],
    identity: str,
    roles: str,
    attribute: str,
) -> None:
    header = {**extra, "alg": "ES256", "kid": "ec"}
    body = {**claims, "exp": int(time.time()) + 600}
    head = b64url_encode(json.dumps(header).encode())
    payload = b64url_encode(json.dumps(body).encode())
    signature = b64url_encode(sign(KEY, f"{head}.{payload}".encode(), "ES256"))
    g = guard(identity=identity, roles=roles, attributes={"attr": attribute})
    result = outcome(g, f"{head}.{payload}.{signature}")
    if isinstance(result, JwtIdentity):
        assert result.identity and all(isinstance(r, str) for r in result.roles)
        assert all(isinstance(v, str) for v in result.attributes.values())

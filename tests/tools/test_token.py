"""``ssegate token``: keygen, jwks and signing, through the real command line."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from ssegate.cli import main
from ssegate.guards.jwks import KeySet, parse_jwks
from ssegate.guards.jwt import ClaimsPolicy
from ssegate.guards.jwt_guard import JwtGuard


@pytest.mark.parametrize("kind", ["rsa", "ec", "ed25519"])
def test_a_signed_token_verifies_against_the_printed_jwks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    pem = tmp_path / "key.pem"
    assert main(["token", "keygen", "--type", kind, "--out", str(pem)]) == 0
    assert pem.stat().st_mode & 0o777 == 0o600
    capsys.readouterr()
    assert main(["token", "jwks", "--key", str(pem), "--kid", "k1"]) == 0
    keys = parse_jwks(json.loads(capsys.readouterr().out))
    args = ["token", "--key", str(pem), "--kid", "k1", "--sub", "bob", "--scope", "a b"]
    assert main([*args, "--ttl", "30", "--iss", "https://i", "--aud", "https://a"]) == 0
    signed = capsys.readouterr().out.strip()
    guard = JwtGuard("g", KeySet(keys), ClaimsPolicy(issuer="https://i", audience="https://a"))
    identity = guard.authenticate(signed)
    assert (identity.identity, identity.roles) == ("bob", {"a", "b"})


def test_signing_without_a_key_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["token", "--kid", "k1"])
    assert exited.value.code == 2
    assert "--key and --kid are required" in capsys.readouterr().err


def test_an_unreadable_key_file_is_one_line_and_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.pem"
    bad.write_text("not a key")
    assert main(["token", "--key", str(bad), "--kid", "k"]) == 2
    assert capsys.readouterr().err.startswith("ssegate: cannot read the key")


def test_claims_given_with_claim_are_in_the_token_json_values_parsed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pem = tmp_path / "key.pem"
    assert main(["token", "keygen", "--out", str(pem)]) == 0
    claims = ["tenant=acme", "n=5", 'roles=["a","b"]', "admin=true", "note={not json", "empty="]
    args = ["token", "--key", str(pem), "--kid", "k1", "--sub", "bob"]
    capsys.readouterr()
    assert main([*args, *(item for claim in claims for item in ("--claim", claim))]) == 0
    payload = capsys.readouterr().out.strip().split(".")[1]
    decoded = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert decoded["sub"] == "bob" and decoded["exp"] > decoded["iat"]
    assert {name: decoded[name] for name in ("tenant", "n", "roles", "admin", "note", "empty")} == {
        "tenant": "acme",
        "n": 5,
        "roles": ["a", "b"],
        "admin": True,
        "note": "{not json",
        "empty": "",
    }


def test_a_claim_without_a_name_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["token", "--key", str(tmp_path / "k.pem"), "--kid", "k", "--claim", "=5"])
    assert exited.value.code == 2
    assert "'=5' is not NAME=VALUE" in capsys.readouterr().err

"""Malformed and hostile tokens against a real gateway over TLS, on h2 and HTTP/1.1.

Every one is answered 403 with ``error="invalid_token"`` and a logged reason, on a connection
that stays up: no exception from parsing a token reaches the TLS protocol ("Fatal error on SSL
protocol") and no traceback is logged. Some need a valid signature to reach the claim checks;
those are signed with the guard's own key.
"""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from ssegate.engine.runtime import free_port
from ssegate.guards.jwt import b64url_encode
from ssegate.tools.token import encode_token
from ssegate_lab.bench.gateway import GatewayProcess
from ssegate_lab.testing.certs import make_keystore

from .signing import AUDIENCE, ISSUER, jwks, key, token

PASSWORD = "hostile-secret"
CONFIG = """\
name: hostile-tokens
vaults:
  my_servers:
    type: filesystem
    options:
      keys:
        store: @KEYSTORE@
        type: pkcs12
        password: @PASSWORD@
guards:
  authn_jwt:
    type: jwt
    options:
      issuer: @ISSUER@
      audience: @AUDIENCE@
      keys: @KEYS@
bindings:
  north_tcp_server:
    type: tcp
    kind: server
    options: {host: 127.0.0.1, port: @PORT@}
    exit: north_tls_server
  north_tls_server:
    type: tls
    kind: server
    vault: my_servers
    options:
      keys: [localhost]
      sni: [localhost]
      alpn: [h2, http/1.1]
    exit: north_http_server
  north_http_server:
    type: http
    kind: server
    options:
      authorization:
        authn_jwt:
          credentials:
            headers:
              authorization: Bearer {credentials}
    routes:
      - when:
          - headers: {":path": "/files/*"}
        guarded:
          authn_jwt: [read]
        exit: east_http_filesystem
  east_http_filesystem:
    type: http-filesystem
    kind: proxy
    routes:
      - when:
          - path: /files/{path}
        with:
          path: ${params.path}
        exit: east_filesystem_server
  east_filesystem_server:
    type: filesystem
    kind: server
    options:
      location: www/
telemetry:
  exporters:
    logs:
      type: stdout
"""


@dataclass(frozen=True)
class Gateway:
    port: int
    ca: Path
    process: GatewayProcess

    def get(self, bearer: str, *, http2: bool, name: str = "notes.txt") -> httpx.Response:
        context = ssl.create_default_context(cafile=str(self.ca))
        with httpx.Client(verify=context, http2=http2, http1=not http2, timeout=10) as client:
            return client.get(
                f"https://localhost:{self.port}/files/{name}",
                headers={"authorization": f"Bearer {bearer}"},
            )

    def logged(self, *texts: str, timeout: float = 5.0) -> list[str]:
        """Output lines holding every one of ``texts``, waiting a moment for the first."""
        deadline = time.monotonic() + timeout
        while True:
            output = list(self.process.output)
            lines = [line for line in output if all(text in line for text in texts)]
            if lines or time.monotonic() > deadline:
                return lines
            time.sleep(0.05)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    root = tmp_path_factory.mktemp("hostile-tokens")
    bundle = make_keystore(root / "localhost.p12", alias="localhost", password=PASSWORD)
    (root / "www").mkdir()
    (root / "www" / "notes.txt").write_text("guarded notes\n")
    port = free_port()
    config = root / "zilla.yaml"
    values = {
        "@KEYSTORE@": str(bundle.keystore),
        "@PASSWORD@": PASSWORD,
        "@ISSUER@": ISSUER,
        "@AUDIENCE@": AUDIENCE,
        "@KEYS@": json.dumps(jwks()),
        "@PORT@": str(port),
    }
    text = CONFIG
    for placeholder, value in values.items():
        text = text.replace(placeholder, value)
    config.write_text(text)
    with GatewayProcess(config) as process:
        yield Gateway(port, bundle.ca_pem, process)


def segment(value: object) -> str:
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    return b64url_encode(raw)


def claims(**changes: object) -> dict[str, object]:
    now = int(time.time())
    # a day: the tokens are made when the module is collected, long before a full run reaches it
    base = {"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "exp": now + 86_400, "scope": "read"}
    return {**base, **changes}


def unsigned(header: object, body: object) -> str:
    return f"{segment(header)}.{segment(body)}.AAAA"


def signed(**changes: object) -> str:
    return encode_token(key("ec"), claims(**changes), kid="ec")


HOSTILE = {
    "alg-list": (unsigned({"alg": ["ES256"], "kid": "ec"}, claims()), "alg ['ES256']"),
    "alg-object": (unsigned({"alg": {"ES256": 1}, "kid": "ec"}, claims()), "alg {'ES256': 1}"),
    "kid-list": (unsigned({"alg": "ES256", "kid": ["ec"]}, claims()), "no kid"),
    "typ-number": (unsigned({"alg": "ES256", "kid": "ec", "typ": 7}, claims()), "typ"),
    "crit-object": (unsigned({"alg": "ES256", "kid": "ec", "crit": {}}, claims()), "crit"),
    "header-5000-deep": (unsigned(b"[" * 5000, claims()), "header JSON nests deeper"),
    "claims-5000-deep": (unsigned({"alg": "ES256", "kid": "ec"}, b"[" * 5000), "claims JSON"),
    "header-not-object": (unsigned("ES256", claims()), "header is not a JSON object"),
    "claims-not-object": (unsigned({"alg": "ES256", "kid": "ec"}, [1]), "not a JSON object"),
    "header-nan": (unsigned(b'{"alg": NaN, "kid": "ec"}', claims()), "header is not JSON"),
    "exp-huge": (signed(exp=10**400), "exp is not a number of seconds"),
    "exp-nan": (signed(exp=float("nan")), "claims is not JSON"),
    "exp-string": (signed(exp="never"), "exp is not a number of seconds"),
    "nbf-list": (signed(nbf=[0]), "nbf is not a number of seconds"),
    "iat-object": (signed(iat={}), "iat is not a number of seconds"),
    "iat-in-the-future": (signed(iat=int(time.time()) + 3600), "issued in the future (iat)"),
    "iss-number": (signed(iss=7), "iss is not a string"),
    "aud-object": (signed(aud={"a": AUDIENCE}), "aud is not a string or a list of strings"),
    "aud-list-of-numbers": (signed(aud=[AUDIENCE, 1]), "aud is not a string or a list"),
    "sub-list": (signed(sub=["alice"]), "sub is not a string"),
}


@pytest.mark.parametrize("http2", [True, False], ids=["h2", "http1.1"])
def test_a_well_formed_token_reads_the_files(gateway: Gateway, http2: bool) -> None:
    response = gateway.get(token(scope="read"), http2=http2)
    assert (response.status_code, response.text) == (200, "guarded notes\n")


@pytest.mark.parametrize("http2", [True, False], ids=["h2", "http1.1"])
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_malformed_token_is_403_invalid_token_with_a_logged_reason(
    gateway: Gateway, case: str, http2: bool
) -> None:
    bearer, reason = HOSTILE[case]
    name = f"{case}-{'h2' if http2 else 'http1.1'}.txt"  # finds this request's log line
    response = gateway.get(bearer, http2=http2, name=name)
    assert response.status_code == 403
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith('Bearer realm="authn_jwt", error="invalid_token"')
    assert reason.replace('"', "'") in challenge
    refused = gateway.logged("guard.refused", f"/files/{name}")
    assert len(refused) == 1 and reason in refused[0]
    output = list(gateway.process.output)
    assert not [line for line in output if "Traceback" in line or "Fatal error" in line]
    assert not any(bearer in line for line in output)

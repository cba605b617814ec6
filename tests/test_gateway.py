"""The whole gateway as a user runs it: ``ssegate start`` on a seed-000-shaped config.

A real process, a real PKCS#12 keystore, real TLS with ALPN, HTTP/1.1 and HTTP/2 clients.
"""

from __future__ import annotations

import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ssegate.engine.runtime import free_port
from ssegate_lab.bench.gateway import GatewayProcess
from ssegate_lab.testing.certs import make_keystore

PASSWORD = "test-secret"

CONFIG = """\
name: gateway-test
vaults:
  my_servers:
    type: filesystem
    options:
      keys:
        store: tls/localhost.p12
        type: pkcs12
        password: ${{{{env.KEYSTORE_PASSWORD}}}}
bindings:
  north_tcp_server:
    type: tcp
    kind: server
    options:
      host: 127.0.0.1
      port:
        - {tls_port}
        - {plain_port}
    routes:
      - when:
          - port: {tls_port}
        exit: north_tls_server
      - when:
          - port: {plain_port}
        exit: north_http_server
  north_tls_server:
    type: tls
    kind: server
    vault: my_servers
    options:
      keys:
        - localhost
      sni:
        - localhost
      alpn:
        - h2
        - http/1.1
    exit: north_http_server
  north_http_server:
    type: http
    kind: server
    options:
      access-control:
        policy: cross-origin
        allow:
          origins:
            - https://app.example.com
          methods:
            - GET
          headers:
            - last-event-id
        max-age: 600
    routes:
      - when:
          - headers:
              :scheme: https
          - headers:
              :scheme: http
        exit: east_http_filesystem_mapping
  east_http_filesystem_mapping:
    type: http-filesystem
    kind: proxy
    routes:
      - when:
          - path: /{{path}}
        with:
          path: ${{params.path}}
        exit: east_filesystem_server
  east_filesystem_server:
    type: filesystem
    kind: server
    options:
      location: www/
telemetry:
  exporters:
    stdout_logs_exporter:
      type: stdout
"""


class Gateway:
    def __init__(self, root: Path, tls_port: int, plain_port: int, ca: Path) -> None:
        self.root = root
        self.tls_port = tls_port
        self.plain_port = plain_port
        self.ca = ca

    def client(self, *, http2: bool) -> httpx.Client:
        context = ssl.create_default_context(cafile=str(self.ca))
        return httpx.Client(verify=context, http2=http2, http1=not http2, timeout=5.0)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    root = tmp_path_factory.mktemp("gateway")
    (root / "tls").mkdir()
    bundle = make_keystore(root / "tls" / "localhost.p12", alias="localhost", password=PASSWORD)
    (root / "www").mkdir()
    (root / "www" / "index.html").write_text("<!doctype html><p>hello from ssegate</p>\n")
    (root / "www" / "app.js").write_text("console.log('ok')\n")
    tls_port, plain_port = free_port(), free_port()
    config = root / "zilla.yaml"
    config.write_text(CONFIG.format(tls_port=tls_port, plain_port=plain_port))
    with GatewayProcess(config, workers=2, env={"KEYSTORE_PASSWORD": PASSWORD}):
        yield Gateway(root, tls_port, plain_port, Path(bundle.ca_pem))


def test_serves_files_over_https_with_http11(gateway: Gateway) -> None:
    with gateway.client(http2=False) as client:
        response = client.get(f"https://localhost:{gateway.tls_port}/index.html")
    assert response.status_code == 200
    assert response.http_version == "HTTP/1.1"
    assert response.text == "<!doctype html><p>hello from ssegate</p>\n"
    assert response.headers["content-type"].startswith("text/html")


def test_serves_files_over_https_with_h2(gateway: Gateway) -> None:
    with gateway.client(http2=True) as client:
        responses = [
            client.get(f"https://localhost:{gateway.tls_port}/{name}")
            for name in ("index.html", "app.js", "index.html")
        ]
    assert [r.status_code for r in responses] == [200, 200, 200]
    assert {r.http_version for r in responses} == {"HTTP/2"}
    assert responses[1].text == "console.log('ok')\n"


def test_etag_revalidation_answers_304(gateway: Gateway) -> None:
    with gateway.client(http2=True) as client:
        url = f"https://localhost:{gateway.tls_port}/index.html"
        etag = client.get(url).headers["etag"]
        again = client.get(url, headers={"if-none-match": etag})
    assert again.status_code == 304
    assert again.content == b""


def test_missing_file_is_404_and_escape_is_refused(gateway: Gateway) -> None:
    with gateway.client(http2=True) as client:
        base = f"https://localhost:{gateway.tls_port}"
        assert client.get(f"{base}/missing.html").status_code == 404
        assert client.get(f"{base}/%2e%2e/zilla.yaml").status_code in (400, 404)


def test_cors_preflight_is_answered_for_an_allowed_origin(gateway: Gateway) -> None:
    with gateway.client(http2=True) as client:
        response = client.options(
            f"https://localhost:{gateway.tls_port}/index.html",
            headers={
                "origin": "https://app.example.com",
                "access-control-request-method": "GET",
                "access-control-request-headers": "last-event-id",
            },
        )
    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == "https://app.example.com"
    assert "GET" in response.headers["access-control-allow-methods"]
    assert "last-event-id" in response.headers["access-control-allow-headers"].lower()
    assert response.headers["access-control-max-age"] == "600"


def test_cors_preflight_from_another_origin_is_refused(gateway: Gateway) -> None:
    with gateway.client(http2=False) as client:
        response = client.options(
            f"https://localhost:{gateway.tls_port}/index.html",
            headers={"origin": "https://evil.example", "access-control-request-method": "GET"},
        )
    assert response.status_code == 403


def test_cleartext_port_serves_http11_and_prior_knowledge_h2(gateway: Gateway) -> None:
    url = f"http://127.0.0.1:{gateway.plain_port}/index.html"
    with httpx.Client(timeout=5.0) as client:
        assert client.get(url).status_code == 200
    with httpx.Client(http1=False, http2=True, timeout=5.0) as client:
        response = client.get(url)
    assert response.status_code == 200
    assert response.http_version == "HTTP/2"


def test_sigterm_drains_and_exits_0_within_5_seconds(tmp_path: Path) -> None:
    (tmp_path / "tls").mkdir()
    make_keystore(tmp_path / "tls" / "localhost.p12", alias="localhost", password=PASSWORD)
    (tmp_path / "www").mkdir()
    config = tmp_path / "zilla.yaml"
    config.write_text(CONFIG.format(tls_port=free_port(), plain_port=free_port()))
    gateway = GatewayProcess(config, workers=2, env={"KEYSTORE_PASSWORD": PASSWORD})
    with gateway:
        assert gateway.process is not None
        started = time.monotonic()
        gateway.process.send_signal(signal.SIGTERM)
        status = gateway.process.wait(timeout=10)
    assert status == 0
    assert time.monotonic() - started < 5.0


def _validate(config: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ssegate", "validate", "-c", str(config)],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", **env},
        timeout=30,
    )


def test_validate_names_an_undefined_exit_by_its_yaml_path(tmp_path: Path) -> None:
    text = CONFIG.format(tls_port=7143, plain_port=7114).replace(
        "        exit: east_http_filesystem_mapping", "        exit: east_x"
    )
    config = tmp_path / "zilla.yaml"
    config.write_text(text)
    result = _validate(config, KEYSTORE_PASSWORD=PASSWORD)
    assert result.returncode == 2
    assert (
        "bindings.north_http_server.routes[0].exit: binding 'east_x' is not defined"
        in result.stderr
    )
    assert "Traceback" not in result.stderr


def test_start_refuses_an_unset_environment_variable_without_a_traceback(tmp_path: Path) -> None:
    config = tmp_path / "zilla.yaml"
    config.write_text(CONFIG.format(tls_port=7143, plain_port=7114))
    result = subprocess.run(
        [sys.executable, "-m", "ssegate", "start", "-c", str(config)],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        timeout=30,
    )
    assert result.returncode == 2
    assert "KEYSTORE_PASSWORD" in result.stderr
    assert "Traceback" not in result.stderr


ALPN_CONFIG = """\
name: alpn-routes
vaults:
  my_servers:
    type: filesystem
    options:
      keys:
        store: tls/localhost.p12
        password: {password}
bindings:
  tcp_server:
    type: tcp
    kind: server
    options:
      host: 127.0.0.1
      port: {port}
    exit: tls_server
  tls_server:
    type: tls
    kind: server
    vault: my_servers
    options:
      keys: [localhost]
      alpn: [h2, http/1.1]
    routes:
      - when:
          - alpn: h2
        exit: http_two
    exit: http_one
  http_two:
    type: http
    kind: server
    options:
      versions: [h2]
    routes:
      - exit: map_two
  map_two:
    type: http-filesystem
    kind: proxy
    routes:
      - when:
          - path: /{{path}}
        with:
          path: ${{params.path}}
        exit: files_two
  http_one:
    type: http
    kind: server
    options:
      versions: [http/1.1]
    routes:
      - exit: map_one
  map_one:
    type: http-filesystem
    kind: proxy
    routes:
      - when:
          - path: /{{path}}
        with:
          path: ${{params.path}}
        exit: files_one
  files_two:
    type: filesystem
    kind: server
    options:
      location: two/
  files_one:
    type: filesystem
    kind: server
    options:
      location: one/
"""


def test_tls_routes_send_each_alpn_protocol_to_its_own_binding(tmp_path: Path) -> None:
    (tmp_path / "tls").mkdir()
    bundle = make_keystore(tmp_path / "tls" / "localhost.p12", alias="localhost", password=PASSWORD)
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "which.txt").write_text(name)
    port = free_port()
    config = tmp_path / "zilla.yaml"
    config.write_text(ALPN_CONFIG.format(password=PASSWORD, port=port))
    gateway = Gateway(tmp_path, port, 0, Path(bundle.ca_pem))
    with GatewayProcess(config):
        with gateway.client(http2=True) as client:
            h2 = client.get(f"https://localhost:{port}/which.txt")
        with gateway.client(http2=False) as client:
            h1 = client.get(f"https://localhost:{port}/which.txt")
    assert (h2.http_version, h2.text) == ("HTTP/2", "two")
    assert (h1.http_version, h1.text) == ("HTTP/1.1", "one")

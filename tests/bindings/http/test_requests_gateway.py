"""``options.requests`` through a real ``ssegate start`` process, over HTTP/1.1 and h2c.

The http server checks ``/files/{name}`` requests (a tenant header, the file name, a ``limit``
query parameter) and ``/orders`` bodies (a JSON Schema from an inline catalog) before routing to
an http-filesystem → filesystem chain: a valid request gets the file (or, for a POST, the
filesystem's 405, which shows it got through), an invalid one gets 400 naming what failed and
the rule, a log line, and a count in ``http.requests.invalid``. A bad model in ``requests``
stops start-up with its path.
"""

from __future__ import annotations

import json
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from ssegate.cli import main
from ssegate.engine.runtime import free_port
from ssegate_lab.bench.gateway import GatewayProcess

NAME = "north_http_server"
RULES = f"bindings.{NAME}.options.requests"
ORDER_SCHEMA = json.dumps(
    {
        "type": "object",
        "properties": {"price": {"type": "integer", "minimum": 0}},
        "required": ["price"],
    }
)


def write_config(root: Path, port: int, metrics: int, *, limit_model: str) -> Path:
    config = f"""
    name: http-requests-test
    catalogs:
      local:
        type: inline
        options:
          subjects:
            order:
              schema: '{ORDER_SCHEMA}'
    bindings:
      north_tcp_server:
        type: tcp
        kind: server
        options: {{host: 127.0.0.1, port: {port}}}
        exit: {NAME}
      {NAME}:
        type: http
        kind: server
        options:
          requests:
            - path: /files/{{name}}
              method: GET
              headers:
                x-tenant: {{model: string, pattern: "[a-z]+"}}
              params:
                path:
                  name: {{model: string, pattern: "[a-z]+\\\\.txt"}}
                query:
                  limit: {limit_model}
            - path: /orders
              method: POST
              content-type: [application/json]
              content:
                model: json
                catalog:
                  local:
                    - subject: order
        routes:
          - when:
              - headers: {{":path": "/files/*"}}
              - headers: {{":path": "/orders"}}
            exit: east_http_filesystem
      east_http_filesystem:
        type: http-filesystem
        kind: proxy
        routes:
          - when:
              - path: /files/{{path}}
            with:
              path: ${{params.path}}
            exit: east_filesystem_server
          - when:
              - path: /orders
            with:
              path: orders.json
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
        metrics:
          type: prometheus
          options:
            endpoints:
              - {{scheme: http, port: {metrics}, path: /metrics}}
    """
    (root / "www").mkdir(exist_ok=True)
    (root / "www" / "notes.txt").write_text("hello from the files\n")
    (root / "www" / "orders.json").write_text("[]\n")
    path = root / "zilla.yaml"
    path.write_text(textwrap.dedent(config))
    return path


@dataclass(frozen=True)
class Gateway:
    port: int
    metrics_port: int
    process: GatewayProcess

    def client(self, *, http2: bool) -> httpx.Client:
        return httpx.Client(
            base_url=f"http://127.0.0.1:{self.port}", http2=http2, http1=not http2, timeout=5.0
        )

    def invalid_count(self) -> float:
        text = httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).text
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("http_requests_invalid_total") and f'"{NAME}"' in line
        )

    def logged(self, text: str, timeout: float = 5.0) -> list[str]:
        """Output lines holding ``text``, waiting a moment for the first."""
        deadline = time.monotonic() + timeout
        while True:
            lines = [line for line in list(self.process.output) if text in line]
            if lines or time.monotonic() > deadline:
                return lines
            time.sleep(0.05)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    root = tmp_path_factory.mktemp("http-requests")
    port, metrics = free_port(), free_port()
    limit = '{model: string, pattern: "[0-9]{1,3}"}'
    process = GatewayProcess(write_config(root, port, metrics, limit_model=limit))
    with process:
        yield Gateway(port, metrics, process)


VALID = {"x-tenant": "acme"}


@pytest.mark.parametrize("http2", [False, True], ids=["http/1.1", "h2"])
def test_a_valid_request_reaches_the_files(gateway: Gateway, http2: bool) -> None:
    with gateway.client(http2=http2) as client:
        response = client.get("/files/notes.txt?limit=10", headers=VALID)
    assert response.http_version == ("HTTP/2" if http2 else "HTTP/1.1")
    assert response.status_code == 200
    assert response.text == "hello from the files\n"


@pytest.mark.parametrize("http2", [False, True], ids=["http/1.1", "h2"])
@pytest.mark.parametrize(
    ("target", "headers", "failed"),
    [
        ("/files/notes.txt?limit=lots", VALID, "query parameter 'limit'"),
        ("/files/notes.txt", VALID, "query parameter 'limit': is missing"),
        ("/files/notes.txt?limit=1", {"x-tenant": "ACME"}, "header 'x-tenant'"),
        ("/files/notes.txt?limit=1", {}, "header 'x-tenant': is missing"),
        ("/files/NOTES.txt?limit=1", VALID, "path parameter 'name'"),
    ],
    ids=["query", "query-missing", "header", "header-missing", "path"],
)
def test_an_invalid_request_is_400_naming_what_failed_and_is_counted(
    gateway: Gateway, http2: bool, target: str, headers: dict[str, str], failed: str
) -> None:
    before = gateway.invalid_count()
    with gateway.client(http2=http2) as client:
        response = client.get(target, headers=headers)
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text.startswith(f"invalid request: {failed}")
    assert f"({RULES}[0]." in response.text
    assert gateway.invalid_count() == before + 1
    assert any(failed in line for line in gateway.logged("http.request_invalid"))


@pytest.mark.parametrize("http2", [False, True], ids=["http/1.1", "h2"])
def test_a_body_is_checked_before_the_exit_sees_it(gateway: Gateway, http2: bool) -> None:
    typed = {"content-type": "application/json"}
    with gateway.client(http2=http2) as client:
        accepted = client.post("/orders", content=b'{"price": 5}', headers=typed)
        refused = client.post("/orders", content=b'{"price": "five"}', headers=typed)
    # Past the check, the filesystem answers POST with 405: the request reached the exit.
    assert accepted.status_code == 405
    assert refused.status_code == 400
    assert refused.text.startswith('invalid request: content: /price: "five" is not of type')
    assert refused.text.endswith(f"({RULES}[1].content)\n")


def test_a_bad_model_in_requests_stops_start_up_with_its_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = "{model: json, catalog: {local: [{subject: no-such-subject}]}}"
    config = write_config(tmp_path, free_port(), free_port(), limit_model=bad)
    assert main(["start", "-c", str(config)]) != 0
    error = capsys.readouterr().err
    assert f"{RULES}[0].params.query.limit.catalog.local" in error
    assert "no-such-subject" in error

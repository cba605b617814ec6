"""``ssegate validate`` refuses a bad ``x-ssegate-quotas`` naming its YAML path, whether the
schema or the binding's build finds it, and passes a good one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CONFIG = """\
name: quotas-validate
bindings:
  north_tcp_server:
    type: tcp
    kind: server
    options: {{host: 127.0.0.1, port: 8080}}
    exit: north_http_server
  north_http_server:
    type: http
    kind: server
    routes:
      - exit: north_sse_server
  north_sse_server:
    type: sse
    kind: server
    options:
      x-ssegate-quotas: {quotas}
    exit: south_sse_client
  south_sse_client:
    type: sse
    kind: client
    exit: south_http_client
  south_http_client:
    type: http
    kind: client
    exit: south_tcp_client
  south_tcp_client:
    type: tcp
    kind: client
    options: {{host: 127.0.0.1, port: 1}}
"""
WHERE = "bindings.north_sse_server.options.x-ssegate-quotas"


def validate(tmp_path: Path, quotas: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "zilla.yaml"
    config.write_text(CONFIG.format(quotas=quotas))
    command = [sys.executable, "-m", "ssegate", "validate", "-c", str(config)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def test_a_config_with_every_quota_is_valid(tmp_path: Path) -> None:
    quotas = (
        "{streams-per-identity: 50, streams-per-address: 100,"
        " opens-per-identity: {rate: 10, per: 1s, burst: 20},"
        " trusted-proxies: [10.0.0.0/8, 127.0.0.1/32]}"
    )
    validated = validate(tmp_path, quotas)
    assert validated.returncode == 0, validated.stderr


@pytest.mark.parametrize(
    ("quotas", "path"),
    [
        ("{streams-per-address: 0}", ".streams-per-address"),
        ("{streams-per-identity: many}", ".streams-per-identity"),
        ("{opens-per-identity: {rate: 1, per: soon}}", ".opens-per-identity.per"),
        ("{opens-per-identity: {per: 1s}}", ".opens-per-identity.rate"),
        ("{streams-per-address: 1, trusted-proxies: 10.0.0.0/8}", ".trusted-proxies"),
        ("{streams-per-address: 1, per-address: 2}", ".per-address"),
        ("{streams-per-address: 1, trusted-proxies: [10.0.0.1/8]}", ".trusted-proxies[0]"),
        ("{streams-per-identity: 1, trusted-proxies: [10.0.0.0/8]}", ".trusted-proxies"),
        ("{opens-per-identity: {rate: 1, per: 0ms}}", ".opens-per-identity.per"),
        ("{opens-per-identity: {rate: 0.5}}", ".opens-per-identity.burst"),
    ],
)
def test_a_bad_value_is_refused_at_its_path(tmp_path: Path, quotas: str, path: str) -> None:
    validated = validate(tmp_path, quotas)
    assert validated.returncode == 2
    assert f"ssegate: {WHERE}{path}:" in validated.stderr, validated.stderr
    assert "Traceback" not in validated.stderr

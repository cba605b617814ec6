"""The seed configs, exactly as Zilla's documents give them, pass ``ssegate validate``.

Seed 000 (SSE proxy with a JWT guard) and seed 003 (SSE-Kafka) are copied unchanged into a
folder holding the keystore they name (``tls/localhost.p12``) and checked by the CLI a user
runs. Their hosts (``sse-server``, ``kafka``) need not resolve: validation opens no connection.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ssegate_lab.testing.certs import make_keystore

FIXTURES = Path(__file__).parent / "config" / "fixtures"
PASSWORD = "seed-secret"


@pytest.mark.parametrize("seed", ["sse-proxy.zilla.yaml", "sse-kafka.zilla.yaml"])
def test_a_seed_config_passes_validate(seed: str, tmp_path: Path) -> None:
    (tmp_path / "tls").mkdir()
    make_keystore(tmp_path / "tls" / "localhost.p12", alias="localhost", password=PASSWORD)
    shutil.copy(FIXTURES / seed, tmp_path / "zilla.yaml")
    result = subprocess.run(
        [sys.executable, "-m", "ssegate", "validate", "-c", str(tmp_path / "zilla.yaml")],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "KEYSTORE_PASSWORD": PASSWORD},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "valid" in result.stdout
    assert "Traceback" not in result.stderr

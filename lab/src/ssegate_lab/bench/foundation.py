"""Benchmarks of the foundation: static files over HTTP/1.1 and h2.

``static``: a gateway serving one small file; ``wrk`` measures HTTP/1.1 requests/s and
``h2load`` measures h2 (cleartext prior knowledge and TLS), each for a fixed duration.
:func:`write_static_config` is also the gateway of ``idle`` (:mod:`ssegate_lab.bench.idle`).
"""

from __future__ import annotations

import re
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from ssegate.engine.runtime import free_port
from ssegate_lab.bench.gateway import GatewayProcess

PASSWORD = "bench-secret"


def write_static_config(workdir: Path) -> tuple[Path, int, int]:
    """A gateway with a plain port (HTTP/1.1 + h2c) and a TLS port (h2 + HTTP/1.1)."""
    from ssegate_lab.testing.certs import make_keystore

    www = workdir / "www"
    www.mkdir(parents=True, exist_ok=True)
    (www / "index.html").write_text("<!doctype html><title>ssegate</title><p>hello</p>\n" * 4)
    make_keystore(workdir / "localhost.p12", alias="localhost", password=PASSWORD)
    plain, tls = free_port(), free_port()
    config = workdir / "zilla.yaml"
    config.write_text(
        f"""\
name: bench-static
vaults:
  server:
    type: filesystem
    options:
      keys:
        store: localhost.p12
        password: {PASSWORD}
bindings:
  tcp_server:
    type: tcp
    kind: server
    options:
      host: 127.0.0.1
      port: [{plain}, {tls}]
    routes:
      - when:
          - port: {tls}
        exit: tls_server
    exit: http_server
  tls_server:
    type: tls
    kind: server
    vault: server
    options:
      keys: [localhost]
      alpn: [h2, http/1.1]
    exit: http_server
  http_server:
    type: http
    kind: server
    routes:
      - exit: files
  files:
    type: http-filesystem
    kind: proxy
    routes:
      - when:
          - path: /{{path}}
        with:
          path: ${{params.path}}
        exit: www
  www:
    type: filesystem
    kind: server
    options:
      location: www
"""
    )
    return config, plain, tls


def _need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise RuntimeError(f"'{tool}' is not installed (Debian: wrk, nghttp2-client)")
    return path


def _tool(argv: list[str], seconds: int, attempts: int = 3) -> str:
    """Run a load tool; its stdout, or an error naming the tool and what it printed.

    h2load's timed mode sometimes never ends after its duration (seen over TLS on a loaded
    machine, with the gateway idle): such a run is killed after ``seconds + 20`` and repeated.
    """
    for _ in range(attempts):
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 20)
        except subprocess.TimeoutExpired:
            continue
        if done.returncode != 0:
            printed = (done.stderr or done.stdout).strip().splitlines()[-3:]
            name = Path(argv[0]).name
            raise RuntimeError(f"{name} exited {done.returncode}: {' '.join(printed)}")
        return done.stdout
    raise RuntimeError(f"{Path(argv[0]).name} did not finish in {attempts} attempts")


def run_static(
    duration: float = 5.0, connections: int = 50, workers: int = 1, runs: int = 1
) -> dict[str, Any]:
    """Requests/s of one small file: wrk (HTTP/1.1), h2load (h2c and h2 over TLS).

    Each tool runs ``runs`` times; the figure is the median, every run is kept.
    Both tools take whole seconds only, so ``duration`` is rounded (at least 1 s).
    """
    seconds = max(1, round(duration))
    results: dict[str, Any] = {
        "scenario": "static",
        "duration_s": seconds,
        "connections": connections,
        "workers": workers,
        "runs": runs,
    }
    with tempfile.TemporaryDirectory() as tmp:
        config, plain, tls = write_static_config(Path(tmp))
        with GatewayProcess(config, workers=workers) as gateway:
            before = gateway.sample()
            per_run: dict[str, list[float]] = {"http1_plain": [], "h2c": [], "h2_tls": []}
            failed: dict[str, int] = {"h2c": 0, "h2_tls": 0}
            for _ in range(runs):
                wrk = _tool(
                    [
                        _need("wrk"),
                        *("-t", "1", "-c", str(connections), "-d", f"{seconds}s"),
                        f"http://127.0.0.1:{plain}/index.html",
                    ],
                    seconds,
                )
                per_run["http1_plain"].append(_parsed(_wrk_rps(wrk), "wrk", wrk))
                for label, url in (
                    ("h2c", f"http://127.0.0.1:{plain}/index.html"),
                    ("h2_tls", f"https://127.0.0.1:{tls}/index.html"),
                ):
                    h2 = _tool(
                        [
                            _need("h2load"),
                            *("-D", str(seconds), "-c", str(connections)),
                            *("-m", "10", "-t", "1", url),
                        ],
                        seconds,
                    )
                    per_run[label].append(_parsed(_h2load_rps(h2), "h2load", h2))
                    failed[label] += _h2load_failed(h2) or 0
            after = gateway.sample()
            for label, values in per_run.items():
                results[f"{label}_rps"] = round(statistics.median(values), 1)
                results[f"{label}_rps_runs"] = values
            for label, count in failed.items():
                results[f"{label}_failed"] = count
            results["gateway_cpu_s"] = round(after.cpu_seconds - before.cpu_seconds, 2)
            results["gateway_rss_mib"] = round(after.rss_bytes / 2**20, 1)
    return results


def _parsed(value: float | None, tool: str, output: str) -> float:
    if value is None:
        raise RuntimeError(f"no requests/s in the output of {tool}: {output[-300:]!r}")
    return value


def _wrk_rps(text: str) -> float | None:
    match = re.search(r"Requests/sec:\s+([\d.]+)", text)
    return float(match.group(1)) if match else None


def _h2load_rps(text: str) -> float | None:
    match = re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", text)
    return float(match.group(1)) if match else None


def _h2load_failed(text: str) -> int | None:
    match = re.search(r"requests: .*?(\d+) failed", text)
    return int(match.group(1)) if match else None

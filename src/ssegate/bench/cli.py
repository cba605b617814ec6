"""``ssegate bench SCENARIO``: run a benchmark and write its results as JSON.

Every scenario is bounded in time and connection count and stops by itself; every address it
sends to is on loopback. Results go to ``bench-results/<scenario>-<UTC time>.json`` (or
``--out``) and are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any


def add_bench_parser(commands: Any) -> None:
    bench = commands.add_parser(
        "bench",
        help="run a benchmark against a real gateway process",
        description="Run one benchmark scenario against a gateway started for it; results are"
        " written as JSON.",
    )
    scenarios = bench.add_subparsers(title="scenarios", metavar="SCENARIO", required=True)

    static = scenarios.add_parser(
        "static", help="static file requests/s over HTTP/1.1 (wrk) and h2 (h2load)"
    )
    static.add_argument("--duration", type=float, default=5.0, help="seconds per tool run")
    static.add_argument("--connections", type=int, default=50)
    static.add_argument("--workers", type=int, default=1)
    static.add_argument("--out", type=Path, default=None, help="JSON file to write")
    static.set_defaults(func=_static)

    idle = scenarios.add_parser("idle", help="gateway RSS per idle connection, plain and TLS")
    idle.add_argument("--connections", type=int, default=10_000)
    idle.add_argument("--out", type=Path, default=None)
    idle.set_defaults(func=_idle)


def _static(args: argparse.Namespace) -> int:
    from ssegate.bench.foundation import run_static

    return _write(run_static(args.duration, args.connections, args.workers), args.out)


def _idle(args: argparse.Namespace) -> int:
    from ssegate.bench.foundation import run_idle

    return _write(run_idle(args.connections), args.out)


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "kernel": platform.release(),
    }


def _write(results: dict[str, Any], out: Path | None) -> int:
    results["machine"] = machine()
    results["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if out is None:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        out = Path("bench-results") / f"{results['scenario']}-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    print(f"written to {out}")
    return 0

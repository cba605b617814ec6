"""The demo stack behind ``./run demo``: an upstream SSE server and ssegate in front of it.

It makes a keystore for ``localhost`` (once, under ``.cache/demo``), starts the example
upstream SSE server, publishes a line to it every second, starts the gateway on
``examples/sse.proxy/zilla.yaml`` and prints the URL to open. Ctrl-C stops everything.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "ssegate-demo"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="./run demo", description=__doc__)
    parser.add_argument("--port", type=int, default=7143, help="https port (default 7143)")
    parser.add_argument("--upstream-port", type=int, default=8001)
    parser.add_argument("--publish-port", type=int, default=7001)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)

    from ssegate.testing.certs import make_keystore

    workdir = ROOT / ".cache" / "demo"
    keystore = workdir / "localhost.p12"
    if not keystore.exists():
        workdir.mkdir(parents=True, exist_ok=True)
        make_keystore(keystore, alias="localhost", password=PASSWORD)
    example = ROOT / "examples" / "sse.proxy"
    env = {
        **os.environ,
        "SSEGATE_KEYSTORE": str(keystore),
        "KEYSTORE_PASSWORD": PASSWORD,
        "SSEGATE_HOST": "0.0.0.0",
        "SSEGATE_HTTPS_PORT": str(args.port),
        "SSEGATE_WWW": str(example / "www"),
        "SSE_SERVER_HOST": "127.0.0.1",
        "SSE_SERVER_PORT": str(args.upstream_port),
    }
    python = sys.executable
    upstream = subprocess.Popen(
        [
            python,
            "-m",
            "ssegate.tools.sse_server",
            "--http-port",
            str(args.upstream_port),
            "--publish-port",
            str(args.publish_port),
        ],
        env=env,
    )
    gateway = subprocess.Popen(
        [
            python,
            "-m",
            "ssegate",
            "start",
            "-c",
            str(example / "zilla.yaml"),
            "--workers",
            str(args.workers),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
    )
    children = [gateway, upstream]
    stopping = False

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    print(
        f"ssegate demo: open https://localhost:{args.port}/index.html "
        "(self-signed certificate: accept it once). Ctrl-C stops.",
        flush=True,
    )
    tick = 0
    publisher: socket.socket | None = None
    try:
        while not stopping and all(child.poll() is None for child in children):
            time.sleep(1.0)
            tick += 1
            try:
                if publisher is None:
                    publisher = socket.create_connection(("127.0.0.1", args.publish_port), 1.0)
                publisher.sendall(f"tick {tick} at {time.strftime('%H:%M:%S')}\n".encode())
            except OSError:
                publisher = None
    finally:
        if publisher is not None:
            publisher.close()
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for child in children:
            try:
                child.wait(timeout=6)
            except subprocess.TimeoutExpired:
                child.kill()
    failed = [c.returncode for c in children if c.returncode not in (0, -signal.SIGTERM)]
    return 0 if stopping and not failed else 1


if __name__ == "__main__":
    sys.exit(main())

"""The demo stack behind ``./run demo``: an upstream SSE server and ssegate in front of it.

It makes a keystore for ``localhost`` (once, under ``.cache/demo``), starts the example
upstream SSE server, publishes a line to it every second, starts the gateway on
``examples/sse.proxy/zilla.yaml`` and prints the URL to open. Ctrl-C stops everything.

The example's ``/events`` is guarded by seed 000's JWT guard. The demo makes the guard's two
signing keys (RSA ``example`` and EC ``example_ec``, once, under ``.cache/demo``), gives the
gateway their public halves through the environment (:func:`example_guard_env`), and puts the
EC private key in the printed URL's fragment (:func:`page_fragment`): the page mints its own
short-lived tokens with WebCrypto, streams with ``?access_token=``, and answers every challenge.
That stands in for an authorization server; the fragment never leaves the browser.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from ssegate.tools.token import (
    PrivateKey,
    generate_key,
    load_private_key,
    private_jwk,
    private_pem,
    public_jwk,
)

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "ssegate-demo"
RSA_KID = "example"
EC_KID = "example_ec"


def example_guard_env(rsa_key: PrivateKey, ec_key: PrivateKey) -> dict[str, str]:
    """The environment that gives the example's ``authn_jwt`` guard its public keys."""
    rsa_jwk = public_jwk(rsa_key, RSA_KID)
    ec_jwk = public_jwk(ec_key, EC_KID)
    return {
        "SSEGATE_JWT_RSA_N": rsa_jwk["n"],
        "SSEGATE_JWT_EC_X": ec_jwk["x"],
        "SSEGATE_JWT_EC_Y": ec_jwk["y"],
    }


def page_fragment(ec_key: PrivateKey, *, ttl: int | None = None, answer: bool = True) -> str:
    """The ``#...`` that lets the example page mint tokens (see ``www/index.html``)."""
    jwk = json.dumps(private_jwk(ec_key, EC_KID), separators=(",", ":")).encode()
    fragment = "#key=" + base64.urlsafe_b64encode(jwk).decode().rstrip("=")
    if ttl is not None:
        fragment += f"&ttl={ttl}"
    if not answer:
        fragment += "&answer=no"
    return fragment


def _demo_key(path: Path, kind: str) -> PrivateKey:
    if not path.exists():
        path.write_bytes(private_pem(generate_key(kind)))
        path.chmod(0o600)
    return load_private_key(path)


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
    ec_key = _demo_key(workdir / "jwt-ec.pem", "ec")
    rsa_key = _demo_key(workdir / "jwt-rsa.pem", "rsa")
    env = {
        **os.environ,
        **example_guard_env(rsa_key, ec_key),
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
        f"ssegate demo: open https://localhost:{args.port}/index.html{page_fragment(ec_key)}"
        "\n(self-signed certificate: accept it once; the part after # is a development"
        " signing key the page uses to mint its tokens). Ctrl-C stops.",
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

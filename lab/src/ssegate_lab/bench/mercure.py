"""Mercure as the peer of the fan-out benchmark: built, configured, run and measured.

Mercure (``github.com/dunglas/mercure``) is an SSE hub in Go; its hub binary is a Caddy build
with the Mercure module. :func:`ensure_mercure` builds that binary with the machine's Go into
``<cache root>/mercure`` (:func:`ssegate.cache.cache_root`; ``./run`` does it in its setup step
``mercure``, and offline, as in the tests, a missing binary is a reason, never a build).
``go install <package>@<version>`` cannot build it: ``caddy/go.mod`` holds a ``replace``
directive, which ``go install`` refuses. So the build writes a two-line main module that
requires the hub's module and builds its ``caddy/mercure`` command package from there. One
more requirement is pinned: the ``x509roots/fallback`` pseudo-version Caddy 2.11.3 asks for
is not served by this machine's module proxy, so a slightly newer one is required instead
(minimal version selection takes the newer one either way). The build is bounded; its failure
is returned as a reason, not raised.

:func:`write_caddyfile` writes the hub's configuration: a plain port and a TLS port on
127.0.0.1 (HTTP/1.1; h2 on TLS), no admin endpoint, no automatic HTTPS, warnings only in the
log, the Mercure handler with an HS256 publisher key, anonymous subscribers, and the hub's own
defaults for everything else (:data:`HUB_DEFAULTS` says what those are). :class:`MercureHub`
runs it in a child process whose CPU and memory are read from ``/proc`` like the gateway's.
Publishing is :mod:`ssegate_lab.bench.mercure_publisher`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ssegate.cache import cache_root, offline_refusal
from ssegate.engine.runtime import free_port
from ssegate.guards.jwt import b64url_encode
from ssegate_lab.bench.gateway import ProcessSample, sample

MERCURE_MODULE = "github.com/dunglas/mercure/caddy"
MERCURE_VERSION = "v0.24.2"
"""The newest tagged release when this was written (2026-06-01)."""
HUB_PACKAGE = f"{MERCURE_MODULE}/mercure"
SETUP_STEP = "mercure"
PINNED_REQUIREMENTS = {
    "golang.org/x/crypto/x509roots/fallback": "v0.0.0-20260602072539-e2ffffe738fb"
}
BUILD_TIMEOUT = 600.0
HUB_PATH = "/.well-known/mercure"

HUB_DEFAULTS: dict[str, str] = {
    "transport": "bolt (a bbolt file with one write transaction per update), unless set;"
    " the benchmark sets 'local' (in memory, no history) unless told otherwise",
    "write_timeout": "600s: each subscription is closed after 80-100 % of it (randomized per"
    " connection), so clients reconnect about every 8-10 minutes",
    "dispatch_timeout": "5s: a write to one subscriber that blocks longer fails and ends that"
    " subscription",
    "heartbeat": "40s: an SSE comment after 40 s without an update",
    "subscriber_queue": "1,000 updates per subscriber (a Go channel); when it is full the hub"
    " disconnects the subscriber instead of blocking the publish",
    "per_update_write": "each subscriber's goroutine serializes the update, writes it and"
    " flushes it: one write() per update per subscriber, never coalesced",
}
"""What Mercure does by default, read from the v0.24.2 source (``hub.go``, ``subscribe.go``,
``localsubscriber.go``, ``caddy/mercure.go``); the benchmark leaves all of it as it is."""


def cache_dir() -> Path:
    return cache_root() / "mercure"


@dataclass(frozen=True, slots=True)
class MercureBuild:
    """The outcome of :func:`ensure_mercure`: the binary, or why there is none."""

    binary: Path | None
    reason: str
    """Empty when the binary is usable."""
    version: str
    go_version: str
    caddy_version: str
    build_seconds: float
    cached: bool

    def as_json(self) -> dict[str, Any]:
        return {
            "build": self.reason or "ok",
            "module": MERCURE_MODULE,
            "version": self.version,
            "go": self.go_version,
            "caddy": self.caddy_version,
            "binary": str(self.binary) if self.binary else None,
            "build_s": round(self.build_seconds, 1),
            "cached": self.cached,
            "pinned_requirements": PINNED_REQUIREMENTS,
        }


def _command_output(argv: list[str], timeout: float = 30.0) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip()


def _go_mod(version: str) -> str:
    pins = "".join(f"\t{module} {pin}\n" for module, pin in PINNED_REQUIREMENTS.items())
    return (
        "module ssegate_lab.bench/mercure-hub\n\ngo 1.26\n\nrequire (\n"
        f"\tgithub.com/dunglas/mercure {version}\n\t{MERCURE_MODULE} {version}\n{pins})\n"
    )


def ensure_mercure(
    directory: Path | None = None,
    version: str = MERCURE_VERSION,
    timeout: float = BUILD_TIMEOUT,
) -> MercureBuild:
    """Build the hub binary unless it is cached; what there is to run, or why not."""
    directory = directory or cache_dir()
    binary = directory / "bin" / f"mercure-{version}"
    go = shutil.which("go")
    go_version = _command_output([go, "version"]) if go else ""
    if binary.exists():
        caddy = _command_output([str(binary), "version"]).split(" ")[0]
        return MercureBuild(binary, "", version, go_version, caddy, 0.0, True)
    missing = offline_refusal(SETUP_STEP, f"the Mercure hub {version}", binary)
    if missing is not None:
        return MercureBuild(None, str(missing), version, go_version, "", 0.0, False)
    if go is None:
        return MercureBuild(None, "go is not on PATH", version, "", "", 0.0, False)
    build = directory / f"build-{version}"
    build.mkdir(parents=True, exist_ok=True)
    (build / "go.mod").write_text(_go_mod(version))
    log = build / "build.log"
    started = time.monotonic()
    argv = [go, "build", "-mod=mod", "-trimpath", "-o", str(binary), HUB_PACKAGE]
    with open(log, "wb") as out:
        process = subprocess.Popen(
            argv, cwd=build, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            seconds = time.monotonic() - started
            reason = f"go build of {HUB_PACKAGE}@{version} did not finish within {timeout:.0f} s"
            return MercureBuild(
                None, f"{reason} (see {log})", version, go_version, "", seconds, False
            )
    seconds = time.monotonic() - started
    if code != 0 or not binary.exists():
        tail = log.read_text(errors="replace").strip().splitlines()[-6:]
        reason = f"go build of {HUB_PACKAGE}@{version} failed with {code}: " + " | ".join(tail)
        return MercureBuild(None, reason, version, go_version, "", seconds, False)
    caddy = _command_output([str(binary), "version"]).split(" ")[0]
    return MercureBuild(binary, "", version, go_version, caddy, seconds, False)


def publisher_token(key: bytes) -> str:
    """An HS256 JWT allowing publication on every topic (``mercure.publish: ["*"]``)."""
    header = b64url_encode(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = b64url_encode(json.dumps({"mercure": {"publish": ["*"]}}).encode())
    signing_input = f"{header}.{claims}".encode()
    signature = hmac.new(key, signing_input, hashlib.sha256).digest()
    return f"{header}.{claims}.{b64url_encode(signature)}"


def write_tls_pems(workdir: Path) -> tuple[Path, Path]:
    """A throw-away server certificate (with its CA) and key as PEM files, for Caddy's ``tls``."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    from ssegate_lab.testing.certs import make_keystore

    password = secrets.token_hex(8)
    bundle = make_keystore(workdir / "mercure.p12", alias="localhost", password=password)
    key, cert, chain = pkcs12.load_key_and_certificates(
        bundle.keystore.read_bytes(), password.encode()
    )
    if key is None or cert is None:
        raise RuntimeError(f"{bundle.keystore}: no key or certificate in the keystore")
    cert_pem, key_pem = workdir / "mercure-cert.pem", workdir / "mercure-key.pem"
    chain_pem = [c.public_bytes(serialization.Encoding.PEM) for c in chain]
    cert_pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM) + b"".join(chain_pem))
    key_pem.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_pem.chmod(0o600)
    return cert_pem, key_pem


def write_caddyfile(
    workdir: Path,
    *,
    plain_port: int,
    tls_port: int,
    publisher_key: str,
    cert_pem: Path,
    key_pem: Path,
    transport: str = "local",
) -> Path:
    """The hub's Caddyfile: one Mercure hub behind a plain and a TLS port on 127.0.0.1."""
    if transport == "local":
        transport_block = "transport local"
    elif transport == "bolt":
        transport_block = f"transport bolt {{\n\t\t\tpath {workdir / 'mercure.db'}\n\t\t}}"
    else:
        raise ValueError(f"transport {transport!r} is not 'local' or 'bolt'")
    caddyfile = workdir / "Caddyfile"
    caddyfile.write_text(
        f"""\
{{
\tadmin off
\tauto_https off
\tlog {{
\t\tlevel WARN
\t}}
\tservers {{
\t\tprotocols h1 h2
\t}}
}}

(hub) {{
\tbind 127.0.0.1
\tmercure {{
\t\t{transport_block}
\t\tpublisher_jwt {publisher_key} HS256
\t\tanonymous
\t}}
\trespond "Not Found" 404
}}

http://:{plain_port} {{
\timport hub
}}

https://:{tls_port} {{
\ttls {cert_pem} {key_pem}
\timport hub
}}
"""
    )
    return caddyfile


class MercureHub:
    """The hub binary in a child process on free loopback ports; stopped on exit from ``with``."""

    def __init__(self, binary: Path, workdir: Path, *, transport: str = "local") -> None:
        self.binary = binary
        self.workdir = workdir
        self.transport = transport
        self.plain_port = free_port()
        self.tls_port = free_port()
        key = secrets.token_hex(32)
        self.token = publisher_token(key.encode())
        cert_pem, key_pem = write_tls_pems(workdir)
        self.caddyfile = write_caddyfile(
            workdir,
            plain_port=self.plain_port,
            tls_port=self.tls_port,
            publisher_key=key,
            cert_pem=cert_pem,
            key_pem=key_pem,
            transport=transport,
        )
        self.process: subprocess.Popen[str] | None = None
        self.output: deque[str] = deque(maxlen=50)

    def __enter__(self) -> MercureHub:
        self.process = subprocess.Popen(
            [str(self.binary), "run", "--config", str(self.caddyfile), "--adapter", "caddyfile"],
            cwd=self.workdir,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        threading.Thread(target=self._drain, daemon=True).start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self.process.poll() is None:
            if _accepts(self.plain_port) and _accepts(self.tls_port):
                return self
            time.sleep(0.05)
        self.__exit__()
        raise RuntimeError("the Mercure hub did not start: " + " | ".join(self.output))

    def _drain(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line.rstrip()[:300])

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def sample(self) -> ProcessSample:
        assert self.process is not None
        return sample(self.process.pid)


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False

"""Wikimedia's KafkaSSE as the peer of the kafka benchmark: installed, served, measured.

KafkaSSE (npm ``kafka-sse``) serves ``GET /<topics>`` as an event stream with one
node-rdkafka consumer per client, started at the latest offset. :func:`ensure_kafkasse` installs
it with ``npm install`` into ``<cache root>/kafkasse`` (:func:`ssegate.cache.cache_root`; ``./run``
does it in its setup step ``kafkasse``); node-rdkafka compiles librdkafka there, which takes
minutes the first time, so the install is bounded and its failure is returned as a reason, not
raised. Offline (as in the tests) a missing install is a reason, never an install.
:class:`KafkaSseServer` writes a small Node server at run time and runs it on a free loopback
port; its CPU and memory are read from ``/proc`` like the gateway's.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections import deque
from pathlib import Path

from ssegate.cache import cache_root, offline_refusal
from ssegate.engine.runtime import free_port
from ssegate_lab.bench.gateway import ProcessSample, sample

SETUP_STEP = "kafkasse"
INSTALL_TIMEOUT = 600.0

_SERVER_JS = """\
'use strict';
// Serves GET /<topic> with KafkaSSE; written by ssegate's kafka benchmark.
const http = require('http');
const kafkaSse = require('kafka-sse');
// KafkaSSE's own default logger runs at debug level with source locations; a deployment
// would log warnings only, so the benchmark does too.
const logger = require('bunyan').createLogger({ name: 'KafkaSSE', level: 'warn' });
const port = Number(process.argv[2]);
const bootstrap = process.argv[3];
const server = http.createServer((req, res) => {
    const topics = req.url.split('?')[0].replace(/^\\//, '').split(',');
    kafkaSse(req, res, topics, {
        kafkaConfig: { 'metadata.broker.list': bootstrap },
        logger,
    }).catch(() => {});
});
server.maxConnections = 100000;
server.listen(port, '127.0.0.1', () => console.log(`kafkasse listening ${port}`));
"""


def cache_dir() -> Path:
    return cache_root() / "kafkasse"


def ensure_kafkasse(directory: Path | None = None, timeout: float = INSTALL_TIMEOUT) -> str:
    """Install kafka-sse unless it is there; ``""`` when usable, else why not."""
    directory = directory or cache_dir()
    if (directory / "node_modules" / "kafka-sse" / "package.json").exists() and (
        directory / "node_modules" / "node-rdkafka" / "build" / "Release"
    ).is_dir():
        return ""
    missing = offline_refusal(SETUP_STEP, "KafkaSSE (npm kafka-sse)", directory)
    if missing is not None:
        return str(missing)
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        return "node or npm is not on PATH"
    directory.mkdir(parents=True, exist_ok=True)
    package = directory / "package.json"
    if not package.exists():
        package.write_text('{"name": "ssegate-bench-kafkasse", "private": true}\n')
    log = directory / "install.log"
    started = time.monotonic()
    with open(log, "wb") as out:
        try:
            finished = subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "kafka-sse"],
                cwd=directory,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return f"npm install kafka-sse did not finish within {timeout:.0f} s (see {log})"
    if finished.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-8:]
        return f"npm install kafka-sse failed with {finished.returncode}: " + " | ".join(tail)
    if time.monotonic() - started > timeout:
        return f"npm install kafka-sse took longer than {timeout:.0f} s"
    return ""


class KafkaSseServer:
    """The Node server in a child process on a free port; stopped on exit from the ``with``."""

    def __init__(self, bootstrap: str, directory: Path | None = None) -> None:
        self.directory = directory or cache_dir()
        self.bootstrap = bootstrap
        self.port = free_port()
        self.process: subprocess.Popen[str] | None = None
        self.output: deque[str] = deque(maxlen=50)

    def __enter__(self) -> KafkaSseServer:
        script = self.directory / "bench-server.js"
        script.write_text(_SERVER_JS)
        self.process = subprocess.Popen(
            ["node", str(script), str(self.port), self.bootstrap],
            cwd=self.directory,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert self.process.stdout is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            self.output.append(line.rstrip())
            if line.startswith("kafkasse listening"):
                threading.Thread(target=self._drain, daemon=True).start()
                return self
        self.__exit__()
        raise RuntimeError("KafkaSSE server did not start: " + " | ".join(self.output))

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

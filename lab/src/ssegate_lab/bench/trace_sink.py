"""Where a bench gateway's delivery traces go: the collector ``./run setup`` builds (step
``otelcol``), listening for OTLP/HTTP on loopback, its debug exporter at ``basic`` verbosity
(one line per export), so that what tracing costs the gateway is measured with a collector
taking the spans, as in production, and not with exports that fail.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from ssegate.engine.runtime import free_port
from ssegate_lab.testing.tools import prepared

START_SECONDS = 60.0


class TraceSink:
    """The collector in a child process while the ``with`` lasts; :attr:`port` takes OTLP/HTTP."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.log = workdir / "collector.log"
        self.config = workdir / "collector.yaml"
        self.config.write_text(
            "receivers:\n  otlp:\n    protocols:\n      http:\n"
            f"        endpoint: 127.0.0.1:{self.port}\n"
            "exporters:\n  debug:\n    verbosity: basic\n"
            "service:\n  telemetry:\n    metrics:\n      level: none\n"
            "  pipelines:\n    traces: {receivers: [otlp], exporters: [debug]}\n"
        )
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> TraceSink:
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                [str(prepared("otelcol")), "--config", str(self.config)],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + START_SECONDS
        while "Everything is ready" not in self.log.read_text(errors="replace"):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the collector did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.2)
        return self

    def spans(self) -> int:
        """Spans the collector has received so far (its debug exporter's ``spans`` counts)."""
        total = 0
        for line in self.log.read_text(errors="replace").splitlines():
            if '"spans": ' in line:
                total += int(line.split('"spans": ')[1].split(",")[0].split("}")[0])
        return total

    def __exit__(self, *exc: object) -> None:
        assert self.process is not None
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

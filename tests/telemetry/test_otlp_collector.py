"""A real gateway process exporting over OTLP/HTTP to a real OpenTelemetry Collector.

The collector is the one ``./run setup`` builds (setup step ``otelcol``): its otlp receiver
listens on loopback and its debug exporter writes every metric data point and log record it
receives to its log, which the tests read.
"""

from __future__ import annotations

import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ssegate.engine.runtime import free_ports
from ssegate_lab.bench.gateway import GatewayProcess
from ssegate_lab.testing.tools import prepared

DEADLINE = 60.0
"""Seconds a test waits for what it names: generous, for a busy machine."""


@dataclass
class Received:
    """What the collector's debug exporter wrote: each metric data point and log record."""

    points: list[tuple[str, dict[str, str], str]] = field(default_factory=list)
    """``(metric name, attributes, "Value: 2.000000" or "Count: 2")``."""
    records: list[dict[str, str]] = field(default_factory=list)
    """Each log record's fields (``EventName``, ``Body``...) and attributes (``-> binding``)."""


def received(output: str) -> Received:
    """Parse the debug exporter's detailed text (``-> Name: ...``, ``Value: ...``)."""
    found = Received()
    name = ""
    attributes: dict[str, str] | None = None
    record: dict[str, str] | None = None
    for line in output.splitlines():
        text = line.strip()
        if text.startswith("LogRecord #"):
            record = {}
            found.records.append(record)
        elif text.startswith("-> Name: "):
            name, record = text.removeprefix("-> Name: "), None
        elif text == "Data point attributes:":
            attributes = {}
        elif text.startswith("-> ") and (attributes is not None or record is not None):
            key, _, value = text.removeprefix("-> ").partition(": ")
            (attributes if attributes is not None else record or {})[f"-> {key}"] = value
        elif text.startswith(("Value: ", "Count: ")) and attributes is not None:
            found.points.append((name, {k[3:]: v for k, v in attributes.items()}, text))
            attributes = None
        elif record is not None and ": " in text and not line[:1].isdigit():
            key, _, value = text.partition(": ")
            record[key] = value
    return found


class Collector:
    """The collector in a child process, its log in a file."""

    def __init__(self, tmp_path: Path, port: int) -> None:
        self.config = tmp_path / "collector.yaml"
        self.log = tmp_path / "collector.log"
        self.port = port
        self.config.write_text(
            "receivers:\n  otlp:\n    protocols:\n      http:\n"
            f"        endpoint: 127.0.0.1:{port}\n"
            "exporters:\n  debug:\n    verbosity: detailed\n"
            "service:\n  telemetry:\n    metrics:\n      level: none\n"
            "  pipelines:\n"
            "    metrics: {receivers: [otlp], exporters: [debug]}\n"
            "    logs: {receivers: [otlp], exporters: [debug]}\n"
        )
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Collector:
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                [str(prepared("otelcol")), "--config", str(self.config)],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.wait_for(lambda text: "Everything is ready" in text, "the collector to start")
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.process is not None
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, condition: Callable[[str], bool], what: str) -> str:
        deadline = time.monotonic() + DEADLINE
        while True:
            text = self.output()
            if condition(text):
                return text
            assert self.process is not None and self.process.poll() is None, text[-3000:]
            assert time.monotonic() < deadline, f"waited for {what}:\n{text[-3000:]}"
            time.sleep(0.2)


def gateway_config(tmp_path: Path, http_port: int, otlp_port: int, prometheus_port: int) -> Path:
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "index.html").write_text("hello\n")
    config = tmp_path / "zilla.yaml"
    config.write_text(f"""\
name: otlp-example
bindings:
  north_tcp_server:
    type: tcp
    kind: server
    options: {{host: 127.0.0.1, port: {http_port}}}
    exit: north_http_server
  north_http_server:
    type: http
    kind: server
    routes:
      - when: [{{headers: {{":path": "/*"}}}}]
        exit: north_http_filesystem_proxy
  north_http_filesystem_proxy:
    type: http-filesystem
    kind: proxy
    routes:
      - when: [{{path: "/{{path}}"}}]
        exit: north_filesystem_server
        with: {{path: "${{params.path}}"}}
  north_filesystem_server:
    type: filesystem
    kind: server
    options: {{location: www/}}
telemetry:
  attributes:
    service.namespace: example
  exporters:
    otlp0:
      type: otlp
      options:
        interval: 1
        signals: [metrics, logs]
        endpoint:
          protocol: http
          location: http://127.0.0.1:{otlp_port}
          overrides: {{metrics: /v1/metrics, logs: /v1/logs}}
    prometheus0:
      type: prometheus
      options:
        endpoints: [{{scheme: http, port: {prometheus_port}}}]
""")
    return config


def status_of(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_metrics_and_log_events_reach_a_real_collector(tmp_path: Path) -> None:
    http_port, otlp_port, prometheus_port = free_ports(3)
    config = gateway_config(tmp_path, http_port, otlp_port, prometheus_port)
    http_server = {"binding": "Str(north_http_server)"}
    expected = [
        ("stream.opens.received", http_server, "Value: 2.000000"),
        ("http.duration", http_server, "Count: 2"),
        (
            "ssegate.filesystem.responses",
            {"binding": "Str(north_filesystem_server)", "status": "Str(200)"},
            "Value: 1.000000",
        ),
    ]

    def requests_logged(got: Received) -> list[dict[str, str]]:
        return [r for r in got.records if r.get("EventName") == "http.request"]

    def arrived(text: str) -> bool:
        got = received(text)
        return all(p in got.points for p in expected) and len(requests_logged(got)) == 2

    info = {"SSEGATE_LOG_LEVEL": "info"}
    with Collector(tmp_path, otlp_port) as collector, GatewayProcess(config, env=info):
        assert status_of(f"http://127.0.0.1:{http_port}/index.html") == 200
        assert status_of(f"http://127.0.0.1:{http_port}/missing.html") == 404
        output = collector.wait_for(arrived, "both requests' metrics and log events")
    assert "-> service.namespace: Str(example)" in output
    assert "-> service.name: Str(ssegate)" in output
    requests = requests_logged(received(output))
    assert [r["-> binding"] for r in requests] == ["Str(north_http_server)"] * 2
    assert "path=/missing.html status=404" in requests[1]["Body"]
    assert {r["SeverityText"] for r in requests} == {"INFO"}


def test_a_collector_that_is_down_costs_a_counted_logged_drop_until_it_is_up(
    tmp_path: Path,
) -> None:
    http_port, otlp_port, prometheus_port = free_ports(3)
    config = gateway_config(tmp_path, http_port, otlp_port, prometheus_port)
    with GatewayProcess(config) as gateway:  # nothing listens on otlp_port yet
        assert gateway.logged("otlp.export_failed", timeout=DEADLINE)
        assert status_of(f"http://127.0.0.1:{http_port}/index.html") == 200
        with urllib.request.urlopen(f"http://127.0.0.1:{prometheus_port}/metrics") as response:
            exposed = response.read().decode()
        failed = 'ssegate_otlp_exports_failed_total{exporter="otlp0",reason="unreachable"'
        assert f'{failed},signal="metrics"}}' in exposed
        with Collector(tmp_path, otlp_port) as collector:
            collector.wait_for(
                lambda text: any(
                    name == "ssegate.otlp.exports.failed" for name, _, _ in received(text).points
                ),
                "the gateway's next export, counting the failed ones",
            )

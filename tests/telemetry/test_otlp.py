"""The otlp exporter's options, and what a collector that is down or slow costs the gateway."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.support.schema_errors import schema_errors

from ssegate.config.errors import ConfigError
from ssegate.config.model import Component
from ssegate.engine.runtime import free_port
from ssegate.telemetry import log
from ssegate.telemetry.metrics import Metrics
from ssegate.telemetry.otlp import LogEventCapture, OtlpExporter, OtlpOptions, otlp_options
from ssegate.telemetry.otlp_messages import LogRecordBuffer


def options_of(**options: Any) -> OtlpOptions:
    return otlp_options(Component("otlp0", "otlp", options, "telemetry.exporters.otlp0"))


def test_defaults_send_both_signals_every_30_seconds_to_the_standard_paths() -> None:
    found = options_of(endpoint={"location": "http://collector:4318"})
    assert found.interval == 30
    assert dict(found.urls) == {
        "metrics": "http://collector:4318/v1/metrics",
        "logs": "http://collector:4318/v1/logs",
    }


def test_signals_choose_what_is_sent_and_overrides_resolve_against_the_location() -> None:
    found = options_of(
        interval=5,
        signals=["metrics"],
        endpoint={
            "protocol": "http",
            "location": "https://collector:4318/ignored",
            "overrides": {"metrics": "/otlp/metrics", "logs": "http://elsewhere/logs"},
        },
    )
    assert found.interval == 5
    assert dict(found.urls) == {"metrics": "https://collector:4318/otlp/metrics"}


def test_a_location_that_is_not_an_http_url_is_refused_naming_it() -> None:
    with pytest.raises(ConfigError) as refused:
        options_of(endpoint={"location": "collector:4318"})
    assert str(refused.value) == (
        "telemetry.exporters.otlp0.options.endpoint.location: "
        "'collector:4318' is not an http:// or https:// URL"
    )


def test_an_override_that_is_neither_a_path_nor_a_url_is_refused_naming_it() -> None:
    with pytest.raises(ConfigError) as refused:
        options_of(endpoint={"location": "http://c:4318", "overrides": {"logs": "v1/logs"}})
    assert str(refused.value).startswith(
        "telemetry.exporters.otlp0.options.endpoint.overrides.logs: 'v1/logs' is neither"
    )


def test_traces_are_sent_when_named_sampling_one_percent_of_records_unless_told() -> None:
    found = options_of(signals=["traces"], endpoint={"location": "http://collector:4318"})
    assert dict(found.urls) == {"traces": "http://collector:4318/v1/traces"}
    assert found.sampling == 0.01
    chosen = options_of(
        signals=["metrics", "traces"],
        traces={"sampling": 0.25},
        endpoint={"location": "http://c:4318", "overrides": {"traces": "/otlp/spans"}},
    )
    assert (chosen.urls["traces"], chosen.sampling) == ("http://c:4318/otlp/spans", 0.25)
    assert options_of(endpoint={"location": "http://c:4318"}).sampling == 0.0


def test_a_traces_option_without_the_traces_signal_is_refused_naming_it() -> None:
    with pytest.raises(ConfigError) as refused:
        options_of(traces={"sampling": 0.5}, endpoint={"location": "http://c:4318"})
    assert str(refused.value) == (
        "telemetry.exporters.otlp0.options.traces: traces are not among this exporter's signals"
    )


@pytest.mark.parametrize("sampling", [1.5, -0.1, "often"])
def test_the_schema_refuses_a_sampling_outside_zero_to_one_naming_it(sampling: object) -> None:
    exporter = {
        "type": "otlp",
        "options": {
            "signals": ["traces"],
            "traces": {"sampling": sampling},
            "endpoint": {"location": "http://c:4318"},
        },
    }
    errors = schema_errors(bindings={}, telemetry={"exporters": {"otlp0": exporter}})
    assert len(errors) == 1
    assert errors[0].startswith("telemetry.exporters.otlp0.options.traces.sampling: ")


def test_validate_refuses_a_bad_sampling_with_its_yaml_path(tmp_path: Path) -> None:
    config = tmp_path / "zilla.yaml"
    config.write_text(
        "name: x\nbindings: {}\ntelemetry:\n  exporters:\n    otlp0:\n      type: otlp\n"
        "      options:\n        signals: [traces]\n        traces: {sampling: 2}\n"
        "        endpoint: {location: 'http://c:4318'}\n"
    )
    command = [sys.executable, "-m", "ssegate", "validate", "-c", str(config)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "telemetry.exporters.otlp0.options.traces.sampling" in done.stderr
    assert "Traceback" not in done.stderr


def test_validate_reports_a_bad_location_as_start_would(tmp_path: Path) -> None:
    config = tmp_path / "zilla.yaml"
    config.write_text(
        "name: x\nbindings: {}\ntelemetry:\n  exporters:\n"
        "    otlp0: {type: otlp, options: {endpoint: {location: 'ftp://c'}}}\n"
    )
    command = [sys.executable, "-m", "ssegate", "validate", "-c", str(config)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "ssegate: telemetry.exporters.otlp0.options.endpoint.location: "
        "'ftp://c' is not an http:// or https:// URL"
    )


def exporter_to(port: int, metrics: Metrics, interval: float = 60.0) -> OtlpExporter:
    base = f"http://127.0.0.1:{port}"
    urls = {"metrics": f"{base}/v1/metrics", "logs": f"{base}/v1/logs"}
    return OtlpExporter("otlp0", OtlpOptions(interval, urls), metrics)


def failed(metrics: Metrics, signal: str, reason: str) -> float:
    return metrics.counter(
        "ssegate.otlp.exports.failed", exporter="otlp0", signal=signal, reason=reason
    )


def test_a_collector_that_is_down_costs_counted_drops_and_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = Metrics()
    exporter = exporter_to(free_port(), metrics)  # nothing listens there
    exporter.buffer = LogRecordBuffer(2)

    async def main() -> None:
        exporter.start()
        try:
            for status in (401, 403, 404, 405, 406):
                log.warning("sse.refused", binding="north_sse_server", status=status)
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="ssegate"):
                await exporter.export()
        finally:
            await exporter.close(timeout=10.0)  # the last export fails too

    asyncio.run(main())
    assert failed(metrics, "metrics", "unreachable") == 2
    assert failed(metrics, "logs", "unreachable") == 2
    # Two held and lost with the first post, three refused by the full buffer, then the
    # warning that said so, lost with the last.
    assert metrics.counter("ssegate.otlp.log_records.dropped", exporter="otlp0") == 6
    first, last = [r.getMessage() for r in caplog.records if "otlp." in r.getMessage()]
    assert first.startswith("otlp.export_failed exporter=otlp0 failures=metrics: http://127.0.0.1")
    assert first.endswith("log_records_dropped=5")
    assert last.endswith("log_records_dropped=1")


def test_a_slow_collector_never_holds_the_event_loop() -> None:
    metrics = Metrics()

    async def main(port: int) -> int:
        exporting = asyncio.ensure_future(exporter_to(port, metrics).export(timeout=2.0))
        ticks = 0
        while not exporting.done():
            await asyncio.sleep(0.01)
            ticks += 1
        await exporting
        return ticks

    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never answers
        ticks = asyncio.run(main(silent.getsockname()[1]))
    assert ticks > 10  # the loop kept running while the post waited
    assert failed(metrics, "metrics", "timeout") == 1


def test_close_stops_catching_log_events() -> None:
    exporter = exporter_to(free_port(), Metrics())

    async def main() -> None:
        exporter.start()
        await exporter.close(timeout=10.0)

    asyncio.run(main())
    log.warning("sse.refused", binding="north_sse_server", status=404)
    assert len(exporter.buffer) == 0


def test_events_the_stdout_exporter_writes_reach_the_log_buffer_as_their_json_lines() -> None:
    buffer = LogRecordBuffer(10)
    capture = LogEventCapture(buffer)
    log.enable_stdout_events(io.StringIO())
    log.add_stdout_sink(capture.event)
    try:
        log.warning("sse.slow_client_closed", binding="north_sse_server", reason="time")
        if not log.logger.isEnabledFor(logging.INFO):
            log.event("http.request", status=200)  # below the level: not exported
    finally:
        log.remove_stdout_sink(capture.event)
        log.disable_stdout_events()
    (event,) = buffer.take()
    assert event.level == logging.WARNING
    line = json.loads(event.line)
    assert (line["event"], line["binding"], line["reason"]) == (
        "sse.slow_client_closed",
        "north_sse_server",
        "time",
    )

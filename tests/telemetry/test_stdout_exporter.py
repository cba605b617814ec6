"""The stdout exporter turns every event into a JSON line on stdout."""

from __future__ import annotations

import json

import pytest

from ssegate.config.model import Component
from ssegate.telemetry import log
from ssegate.telemetry.stdout import start_stdout


def test_events_become_json_lines_on_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        start_stdout(Component("stdout_logs_exporter", "stdout"))
        log.event("tcp.accept", binding="north_tcp_server", peer="127.0.0.1:5000")
    finally:
        log.disable_stdout_events()
    (line,) = capsys.readouterr().out.splitlines()
    record = json.loads(line)
    assert record["event"] == "tcp.accept"
    assert record["binding"] == "north_tcp_server"
    assert record["peer"] == "127.0.0.1:5000"


def test_telemetry_attributes_ride_on_every_line(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        start_stdout(Component("logs", "stdout"), {"service.namespace": "example"})
        log.event("tcp.accept", binding="north_tcp_server")
        log.warning("sse.refused", binding="north_sse_server", status=404)
    finally:
        log.disable_stdout_events()
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["attributes"] for r in records] == [{"service.namespace": "example"}] * 2

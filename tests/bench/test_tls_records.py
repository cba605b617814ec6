"""The TLS record-cost probe: every batch size measured, and every byte through the record layer."""

from __future__ import annotations

from ssegate_lab.bench.tls_records import BATCHES, chunk, event, measure


def test_an_event_is_about_the_size_asked_and_ends_an_sse_event() -> None:
    data = event(7, 150)
    assert len(data) == 150
    assert data.startswith(b"id:AQIA000007\ndata:") and data.endswith(b"\n\n")
    assert chunk(data) == b"96\r\n" + data + b"\r\n"


def test_each_batch_size_is_measured_and_fewer_records_cost_fewer_wire_bytes() -> None:
    result = measure(events=200, size=150, repeat=1)
    assert [case["batch"] for case in result["cases"]] == list(BATCHES)
    assert result["session"]["version"] == "TLSv1.3"
    wire = [case["wire_bytes_per_event"] for case in result["cases"]]
    assert wire == sorted(wire, reverse=True)  # a record's header and tag shared by more events
    assert all(case["cpu_us_per_event"] > 0 for case in result["cases"])
    assert result["cases"][0]["writes"] == 200

"""Every bench scenario runs end to end at a tiny size and writes the fields the docs quote.

These keep the harness from rotting; the figures themselves come from full runs
(``docs/performance.md``). The stamp scanner and the histogram are checked on their own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ssegate.cli import main
from ssegate_lab.bench.latency import LatencyHistogram, ReceiveCounters, StampTally, bucket_of


def _bench(tmp_path: Path, *args: str) -> dict[str, object]:
    out = tmp_path / "result.json"
    assert main(["bench", *args, "--out", str(out)]) == 0
    result: dict[str, object] = json.loads(out.read_text())
    assert result["machine"]
    return result


def test_histogram_percentiles_stay_within_two_percent() -> None:
    histogram = LatencyHistogram()
    for micros in range(1, 100_001):
        histogram.record(micros)
    assert histogram.percentile_ms(0.5) == pytest.approx(50.0, rel=0.02)
    assert histogram.percentile_ms(0.99) == pytest.approx(99.0, rel=0.02)
    assert histogram.max_ms() == pytest.approx(100.0, rel=0.02)
    assert bucket_of(-5) == 0


def test_stamp_tally_reads_chunked_blocks_split_anywhere_and_counts_gaps() -> None:
    counters = ReceiveCounters()
    tally = StampTally(counters)
    body = b"".join(
        b"%x\r\n%b\r\n" % (len(block), block)
        for block in (
            b"id:1\ndata:1000\n\n",
            b":\n\n",
            b"id:2\ndata:2000\n\n",
            b"id:5\ndata:3000\n\n",
        )
    )
    for index in range(0, len(body), 7):
        tally.feed(body[index : index + 7], now_ns=1_000_000)
    assert (counters.received, counters.gaps, counters.duplicates) == (3, 2, 0)
    assert counters.histogram.total == 3


def test_static_scenario_measures_http1_and_h2(tmp_path: Path) -> None:
    result = _bench(tmp_path, "static", "--duration", "1", "--connections", "4", "--runs", "1")
    for field in ("http1_plain_rps", "h2c_rps", "h2_tls_rps"):
        assert isinstance(result[field], float) and result[field] > 0


def test_idle_scenario_reports_bytes_per_connection(tmp_path: Path) -> None:
    result = _bench(tmp_path, "idle", "--connections", "50")
    for label in ("plain", "tls"):
        side = result[label]
        assert isinstance(side, dict)
        assert side["opened"] == 50 and "bytes_per_connection" in side
        assert side["client_cpu_share"] >= 0 and "client_saturated" in side


def test_proxy_scenario_delivers_every_event_over_h1_and_h2(tmp_path: Path) -> None:
    plot = tmp_path / "latency.png"
    result = _bench(
        tmp_path,
        "proxy",
        *("--clients", "3", "--rate", "50", "--duration", "1", "--protocol", "h1,h2"),
        *("--h2-streams", "3", "--plot", str(plot)),
    )
    cases = result["cases"]
    assert isinstance(cases, list) and [c["protocol"] for c in cases] == ["h1", "h2"]
    for case in cases:
        assert case["opened"] == 3 and case["received"] == case["expected"] > 0
        assert case["gaps"] == 0 and case["delivered_events_per_s"] > 0
        assert set(case["latency_ms"]) == {"p50", "p90", "p99", "max"}
        assert {"gateway", "upstream", "clients", "other_work_on_machine"} <= set(case["cpu_s"])
    assert plot.exists() or "matplotlib is not installed" in str(result["plot"])


def test_proxy_idle_scenario_reports_bytes_per_client(tmp_path: Path) -> None:
    result = _bench(tmp_path, "proxy-idle", "--clients", "5")
    assert result["opened"] == 5 and "gateway_bytes_per_client" in result


def test_an_h2_case_gives_h2load_the_bulk_of_the_streams_and_python_a_few_for_latency(
    tmp_path: Path,
) -> None:
    from ssegate_lab.bench.h2load import LATENCY_STREAMS

    clients = LATENCY_STREAMS + 4
    result = _bench(
        tmp_path,
        "proxy",
        *("--clients", str(clients), "--rate", "50", "--duration", "1", "--protocol", "h2"),
        *("--h2-streams", "2"),
    )
    cases = result["cases"]
    assert isinstance(cases, list)
    [case] = cases
    assert case["clients_by_client"] == {"python-h2": LATENCY_STREAMS, "h2load": 4}
    h2load = case["h2load"]
    assert (h2load["connections"], h2load["opened"], h2load["complete"]) == (2, 4, True)
    assert h2load["data_bytes"] == h2load["data_bytes_owed"] > 0
    assert case["opened"] == clients and case["missing"] == 0
    assert case["received"] == case["expected"] == 50 * clients
    assert case["cpu_s"]["h2load"] >= 0 and case["client_saturated"] is False

"""``ssegate bench keyed --loop-lag``: every worker of the real gateway samples its own loop, and
each case keeps their slow moments of its measured window."""

from __future__ import annotations

from pathlib import Path

import pytest

from ssegate_lab.bench.keyed import run_keyed
from ssegate_lab.broker import BrokerInfo
from ssegate_lab.loop_lag_report import read_directory
from ssegate_lab.testing.kafka import kafka_broker as kafka_broker

pytestmark = pytest.mark.integration


def test_each_forked_worker_samples_its_loop_and_the_case_summarises_them_per_worker(
    kafka_broker: BrokerInfo, tmp_path: Path
) -> None:
    lag = tmp_path / "lag"
    result = run_keyed(
        [20], rate=200.0, duration=1.0, keys=40, broker_info=kafka_broker, workers=2,
        default_offset="live", loop_lag_dir=lag,
    )  # fmt: skip
    [case] = result["cases"]
    assert case["complete"]
    started, ended = case["window_monotonic_s"]
    assert ended - started >= 1.0
    recorded = read_directory(lag)
    workers = recorded.processes  # the supervisor makes no loop: only its workers do
    assert len(workers) == 2 and len({p["ppid"] for p in workers}) == 1  # one supervisor's
    summary = case["loop_lag"]
    assert summary["over_ms"] == 50.0
    assert {row["pid"] for row in summary["workers"]} == {p["pid"] for p in workers}
    assert summary["moments"] == sum(row["count"] for row in summary["workers"])
    assert result["loop_lag_dir"] == str(lag)

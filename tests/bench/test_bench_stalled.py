"""``ssegate bench stalled`` at a small scale against the test broker: every stalled client is
reset once it has been behind the partition cache for the timeout, and counted by the gateway;
every live event is counted once."""

from __future__ import annotations

import pytest

from ssegate_lab.bench.stalled import run_stalled
from ssegate_lab.broker import BrokerInfo
from ssegate_lab.testing.kafka import kafka_broker as kafka_broker

pytestmark = pytest.mark.integration


def test_stalled_clients_are_reset_within_the_bound_and_live_readers_miss_nothing(
    kafka_broker: BrokerInfo,
) -> None:
    result = run_stalled(
        40, rate=400.0, live=4, duration=2.0, warmup=2.0, repeat=1, slow_client_timeout=2.0,
        cache_max_age=1.0, after=3.0, broker_info=kafka_broker,
    )  # fmt: skip
    [run] = result["runs"]
    stalled = run["stalled_clients"]
    assert stalled["connected"] == stalled["ended"] == stalled["by_reset"] == 40
    assert stalled["within_bound"] == 40 and stalled["never_ended"] == 0
    # stalled for the timeout before it is asked, then behind the cache for the timeout
    assert 4.0 <= stalled["end_s"]["min"] <= stalled["end_s"]["max"] <= stalled["bound_s"]
    assert run["slow_clients_metric"] == {"time": 40.0, "total": 40.0}
    accepted = run["accepted"]  # each got its 200 head, peeked at, not read
    assert accepted["heads"] == accepted["ok"] == 40 and accepted["head_s"]["max"] is not None
    live = run["live"]
    assert (live["opened"], live["lost"], live["duplicates"], live["closed_early"]) == (4, 0, 0, 0)
    assert run["verdicts"]["complete"] and run["verdicts"]["all_reset"]
    for phase in run["phases"].values():
        assert phase["received"] > 0 and phase["latency_ms"]["p99"] is not None
        assert phase["load_cpu_share"] >= 0 and phase["gateway_cpu_share"] > 0
        assert phase["gc_full_in_window"] >= 0 and phase["gc_longest_full_pause_ms"] >= 0
        timeline = phase["timeline"]  # when in the phase each event came, half a second a point
        assert sum(point["events"] for point in timeline) == phase["received"]
        assert [point["t"] for point in timeline] == sorted({point["t"] for point in timeline})
        assert all(point["p99_ms"] <= point["max_ms"] for point in timeline)
    assert run["rss_mib"]["after"] > 0 and run["p99_ratio"] is not None
    assert run["phases"]["after"]["seconds"] >= 3.0  # its own length, not the baseline's
    [point] = run["rss_mib"]["after_timeline"]  # one sample, at the phase's end
    assert 3.0 <= point["t"] < 3.5 and point["mib"] > 0
    assert result["summary"]["runs"] == 1

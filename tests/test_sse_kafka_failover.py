"""Kafka nodes crash under 120 SSE clients of a gateway: nothing lost, repeated or reordered.

The scenario is ``ssegate bench failover``'s case (:func:`ssegate_lab.bench.failover.run_case`) at
test size, on a real cluster of 3 KRaft nodes and a real ``ssegate start`` process: a topic of
3 partitions replicated 3 times, an ``acks=all`` idempotent producer writing 200 numbered
messages/s over 30 keys, 40 unfiltered streams (``/events``) and 80 streams filtered on one key
(``/events/{id}``) reading through the gateway. The leader of partition 0 is killed with
SIGKILL, restarted once writes go on without it and back in sync, then the leader of another
partition is killed too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ssegate_lab.bench.failover import Workload, run_case
from ssegate_lab.testing.kafka import running_cluster

pytestmark = pytest.mark.integration

MAX_GAP_SECONDS = 30.0


@pytest.mark.timeout(300)  # about 60 s on idle cores; three JVMs start slower on busy ones
def test_two_leader_crashes_lose_and_repeat_nothing_at_any_client(tmp_path: Path) -> None:
    with running_cluster(tmp_path / "kafka") as cluster:
        result = run_case(cluster, tmp_path, Workload(clients=120, rate=200.0, keys=30))
    print(json.dumps(result, indent=1))  # the figures, on failure and with -s

    assert (result["streams"], result["unfiltered"]) == (120, 40)
    assert result["producer_failures"] == []
    assert result["acknowledged"] == result["produced"] > 0
    # every client got exactly what was acknowledged for its filter, once, in partition order
    assert result["incomplete_streams"] == []
    assert result["complete"] == 120
    assert (result["lost"], result["duplicates"]) == (0, 0)
    assert (result["out_of_order"], result["unexpected"], result["closed_early"]) == (0, 0, 0)
    assert result["received"] == result["owed"]

    first, second = result["kills"]
    assert first["node"] != second["node"] and 0 in first["led_partitions"]
    for kill in (first, second):
        assert kill["gap_s"] is not None and kill["gap_s"] <= MAX_GAP_SECONDS, kill
        named = [line for line in result["gateway_broker_left_lines"]
                 if f"broker={kill['node']} address={kill['address']}" in line]  # fmt: skip
        assert named, (kill, result["gateway_broker_left_lines"])
    metrics = result["gateway_metrics"]
    assert metrics["ssegate_kafka_brokers_left_total"] == 2
    assert metrics["ssegate_kafka_brokers_joined_total"] == 1  # the first one, restarted
    assert metrics["ssegate_kafka_brokers"] == 2  # the second one is still down
    assert metrics["ssegate_kafka_leader_changes_total"] >= 2
    assert metrics["ssegate_kafka_broker_available"] == 1

"""What two metadata answers tell apart: brokers that left or joined, leaders that moved."""

from __future__ import annotations

from ssegate.bindings.kafka.cluster_view import ClusterView
from ssegate.bindings.kafka.fetch_events import ClusterChanged, LeaderMoved

BROKERS = {1: "127.0.0.1:9092", 2: "127.0.0.1:9093", 3: "127.0.0.1:9094"}
LEADERS = {("t", 0): 3, ("t", 1): 1, ("t", 2): 2}


def test_the_first_view_reports_the_brokers_and_no_change() -> None:
    change = ClusterView(BROKERS, LEADERS).changes_since(None)

    assert change == ClusterChanged(BROKERS, first=True)


def test_the_same_view_again_is_no_change() -> None:
    before = ClusterView(BROKERS, LEADERS)

    assert ClusterView(dict(BROKERS), dict(LEADERS)).changes_since(before) is None


def test_a_fenced_leader_leaves_and_its_partition_moves() -> None:
    before = ClusterView(BROKERS, LEADERS)
    after = ClusterView({1: BROKERS[1], 2: BROKERS[2]}, {**LEADERS, ("t", 0): 1})

    change = after.changes_since(before)

    assert change is not None
    assert change.left == {3: "127.0.0.1:9094"} and change.joined == {}
    assert change.moves == (LeaderMoved("t", 0, previous=3, leader=1),)
    assert set(change.brokers) == {1, 2} and not change.first


def test_a_restarted_node_joins_without_taking_its_partitions_back() -> None:
    before = ClusterView({1: BROKERS[1], 2: BROKERS[2]}, {**LEADERS, ("t", 0): 1})
    after = ClusterView(BROKERS, {**LEADERS, ("t", 0): 1})

    change = after.changes_since(before)

    assert change is not None
    assert change.joined == {3: "127.0.0.1:9094"} and change.left == {} and change.moves == ()


def test_a_partition_without_a_leader_is_a_move_to_minus_one() -> None:
    before = ClusterView(BROKERS, LEADERS)

    change = ClusterView(BROKERS, {**LEADERS, ("t", 1): -1}).changes_since(before)

    assert change is not None and change.moves == (LeaderMoved("t", 1, 1, -1),)


def test_a_newly_started_topic_brings_no_moves() -> None:
    before = ClusterView(BROKERS, LEADERS)

    assert ClusterView(BROKERS, {**LEADERS, ("u", 0): 2}).changes_since(before) is None

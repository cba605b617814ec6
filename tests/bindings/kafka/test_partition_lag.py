"""Per-partition lag and the fan-out backlog: the pure table and its gauges."""

from __future__ import annotations

from ssegate.bindings.kafka.fetch_events import (
    Fetched,
    PartitionsAdded,
    TopicsListed,
    TopicStarted,
)
from ssegate.bindings.kafka.partition_lag import LAG, PENDING, PartitionLag, register
from ssegate.telemetry.metrics import Metrics
from ssegate.telemetry.prometheus import render


def started(lag: PartitionLag, starts: dict[int, int], ends: dict[int, int]) -> None:
    lag.observe(TopicStarted("t", starts, ends, False))


def test_a_topic_started_at_its_log_start_is_behind_by_what_the_log_holds() -> None:
    lag = PartitionLag()
    started(lag, {0: 0, 1: 5}, {0: 40, 1: 5})
    assert lag.lags() == {("t", 0): 40, ("t", 1): 0}


def test_batches_the_loop_took_in_move_progress_and_the_fetch_threads_ends_move_the_end() -> None:
    lag = PartitionLag()
    started(lag, {0: 0, 1: 0}, {0: 40, 1: 10})
    lag.observe(Fetched("t", 0, [], 30))
    assert lag.lags() == {("t", 0): 10, ("t", 1): 10}
    lag.set_ends({("t", 0): 55, ("t", 1): 10})
    assert lag.lags() == {("t", 0): 25, ("t", 1): 10}
    lag.observe(Fetched("t", 0, [], 55))
    lag.observe(Fetched("t", 1, [], 10))
    assert lag.lags() == {("t", 0): 0, ("t", 1): 0}


def test_the_catch_up_readers_batches_are_not_progress() -> None:
    lag = PartitionLag()
    started(lag, {0: 100}, {0: 100})
    lag.observe(Fetched("t", 0, [], 7, catch_up=True))
    assert lag.lags() == {("t", 0): 0}


def test_an_end_heard_before_a_batch_taken_in_since_shows_no_negative_lag() -> None:
    lag = PartitionLag()
    started(lag, {0: 0}, {0: 3})
    lag.observe(Fetched("t", 0, [], 9))
    assert lag.lags() == {("t", 0): 0}


def test_added_partitions_start_where_the_fetch_starts_them_and_wait_for_an_end() -> None:
    lag = PartitionLag()
    started(lag, {0: 0}, {0: 0})
    lag.observe(PartitionsAdded("t", {1: 0}))
    lag.observe(TopicsListed(frozenset({"t"})))
    assert lag.lags() == {("t", 0): 0}  # no end known for partition 1 yet
    lag.set_ends({("t", 0): 0, ("t", 1): 4})
    assert lag.lags() == {("t", 0): 0, ("t", 1): 4}


def test_the_gauges_are_read_when_exported_with_topic_and_partition_attributes() -> None:
    metrics = Metrics()
    pending = [0]
    lag = register(metrics, "cache", lambda: pending[0])
    started(lag, {0: 0, 1: 0}, {0: 12, 1: 0})
    pending[0] = 250
    text = render(metrics)
    assert 'ssegate_kafka_partition_lag{binding="cache",partition="0",topic="t"} 12' in text
    assert 'ssegate_kafka_partition_lag{binding="cache",partition="1",topic="t"} 0' in text
    assert 'ssegate_kafka_fanout_pending{binding="cache"} 250' in text
    lag.observe(Fetched("t", 0, [], 12))
    pending[0] = 0
    assert metrics.gauge_value(LAG, "cache", topic="t", partition="0") == 0.0
    assert metrics.gauge_value(PENDING, "cache") == 0.0

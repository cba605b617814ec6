"""``ssegate bench keyed`` against the test broker: every owed message counted, nothing more."""

from __future__ import annotations

import pytest

from ssegate_lab.bench.keyed import run_keyed, summarize
from ssegate_lab.broker import BrokerInfo
from ssegate_lab.testing.kafka import kafka_broker as kafka_broker

pytestmark = pytest.mark.integration


def test_keyed_scenario_delivers_each_stream_exactly_the_messages_of_its_key(
    kafka_broker: BrokerInfo,
) -> None:
    # 40 keys, 20 with a stream: about half of what is produced is owed to somebody
    result = run_keyed(
        [20], rate=200.0, duration=1.0, keys=40, broker_info=kafka_broker,
        default_offset="live", rss_every=0.25,
    )  # fmt: skip
    assert result["default_offset"] == "live"
    [case] = result["cases"]
    assert (case["opened"], case["failed"]) == (20, 0)
    assert case["produced"] == 200
    assert 0 < case["owed"] < 200
    assert case["received"] == case["owed"]
    assert (case["lost"], case["duplicates"], case["gaps"]) == (0, 0, 0)
    assert case["complete"] and case["latency_ms"]["p99"] is not None
    assert case["client_saturated"] is False and case["client_cpu_share"] < 0.8
    assert len(case["rss_mib_samples"]) >= 2 and "rss_growth_after_first_fifth" in case
    [row] = result["summary"]
    assert row["all_complete"] and row["runs"] == 1


def test_keyed_streams_held_on_shared_http2_connections_are_counted_alike(
    kafka_broker: BrokerInfo,
) -> None:
    # 30 streams, 8 to an HTTP/2 connection: four connections, the last holding six
    result = run_keyed(
        [30], rate=200.0, duration=1.0, keys=60, broker_info=kafka_broker, h2_streams=8,
    )  # fmt: skip
    assert result["protocol"] == "h2c, 8 streams per connection"
    [case] = result["cases"]
    assert (case["opened"], case["failed"]) == (30, 0)
    assert 0 < case["owed"] < 200
    assert case["received"] == case["owed"]
    assert (case["lost"], case["duplicates"], case["gaps"], case["closed_early"]) == (0, 0, 0, 0)
    assert case["complete"]


def test_more_streams_than_keys_is_refused() -> None:
    with pytest.raises(ValueError, match="must not exceed keys"):
        run_keyed([50], keys=10)


def test_the_summary_takes_medians_and_fails_a_case_with_any_loss() -> None:
    def case(p99: float, lost: int, client: float = 0.1) -> dict[str, object]:
        return {
            "gateway": "ssegate", "streams": 10, "complete": lost == 0, "lost": lost,
            "duplicates": 0, "latency_ms": {"p99": p99}, "gateway_cpu_share": 0.5,
            "gateway_us_per_message": 10.0, "client_cpu_share": client,
            "client_saturated": client > 0.8,
        }  # fmt: skip

    [row] = summarize([case(10, 0), case(30, 2), case(20, 0, client=0.9)])
    assert row["p99_ms_median"] == 20 and row["lost"] == 2 and not row["all_complete"]
    assert row["client_saturated_runs"] == 1


def test_the_warm_up_before_the_measured_window_reaches_no_stream(
    kafka_broker: BrokerInfo,
) -> None:
    # a second of messages under keys no stream filters on, then the measured half second
    result = run_keyed(
        [10], rate=200.0, duration=0.5, keys=20, broker_info=kafka_broker, warmup=1.0,
    )  # fmt: skip
    assert result["warmup_s"] == 1.0
    [case] = result["cases"]
    assert case["warmup_produced"] == 200 and case["misdelivered"] == 0
    assert case["produced"] == 100 and 0 < case["owed"] < 100
    assert case["received"] == case["owed"] and (case["lost"], case["duplicates"]) == (0, 0)
    assert case["complete"]


@pytest.mark.parametrize("filter_mode", ["header", "extracted"])
def test_streams_filtering_on_a_header_or_a_value_s_field_are_counted_as_key_ones(
    kafka_broker: BrokerInfo, filter_mode: str
) -> None:
    # the warm-up's keys travel in the header or the field too, and reach no stream
    result = run_keyed(
        [10], rate=200.0, duration=0.5, keys=20, broker_info=kafka_broker, warmup=0.5,
        filter_mode=filter_mode,
    )  # fmt: skip
    assert result["filter"] == filter_mode
    [case] = result["cases"]
    assert (case["opened"], case["failed"], case["misdelivered"]) == (10, 0, 0)
    assert case["produced"] == 100 and 0 < case["owed"] < 100
    assert case["received"] == case["owed"]
    assert (case["lost"], case["duplicates"], case["gaps"], case["late"]) == (0, 0, 0, 0)
    assert case["complete"]

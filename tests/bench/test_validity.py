"""What makes a result a verdict: distinct events against what was owed, an idle enough client."""

from __future__ import annotations

from ssegate_lab.bench.validity import SATURATED_SHARE, client_load, delivery, losses


def test_ten_events_delivered_twice_are_twenty_read_ten_distinct_and_none_missing() -> None:
    row = delivery(expected=10, received=20, duplicates=10, gaps=0, late=0, span_s=2.0)
    assert (row["distinct"], row["missing"], row["duplicates"]) == (10, 0, 10)
    assert row["delivered_events_per_s"] == 5.0  # distinct events only
    assert losses(row) == ["10 duplicated"]


def test_duplicates_cannot_hide_a_loss() -> None:
    """Five of ten events delivered twice: as many read as owed, yet half of them lost."""
    row = delivery(expected=10, received=10, duplicates=5, gaps=0, late=0, span_s=1.0)
    assert (row["missing"], row["duplicates"]) == (5, 5)
    assert losses(row) == ["5 lost", "5 duplicated"]


def test_a_complete_case_has_no_losses_and_failed_or_closed_streams_are_named() -> None:
    row = delivery(expected=10, received=10, duplicates=0, gaps=0, late=0, span_s=1.0)
    assert losses(row) == []
    assert losses(row | {"failed": 2, "closed_early": 1}) == [
        "2 stream(s) not opened",
        "1 stream(s) closed early",
    ]


def test_the_busiest_client_process_decides_and_above_the_threshold_it_is_saturated() -> None:
    assert client_load([0.5, 1.8], wall_s=2.0) == {
        "client_cpu_share": 0.9,
        "client_saturated": True,
    }
    calm = client_load([0.5, 1.8], wall_s=2.0, cores_each=2)
    assert calm["client_cpu_share"] == 0.45 and not calm["client_saturated"]
    assert SATURATED_SHARE == 0.8
    assert client_load([], wall_s=0.0) == {"client_cpu_share": 0.0, "client_saturated": False}


def test_misdelivered_skipped_late_events_and_a_case_said_incomplete_are_losses() -> None:
    row = delivery(expected=10, received=10, duplicates=0, gaps=2, late=1, span_s=1.0)
    assert losses(row | {"misdelivered": 500}) == ["500 misdelivered", "2 gap(s)", "1 late"]
    assert losses({"missing": 0, "complete": False}) == ["the case says it is not complete"]
    assert losses({"lost": 7, "complete": False}) == ["7 lost"]  # the Kafka scenarios' name

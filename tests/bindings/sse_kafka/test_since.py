"""``?since=``: the accepted forms, the reason for each refused one, and the start it gives."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ssegate.bindings.sse_kafka.since import (
    MAX_AHEAD_MS,
    Since,
    SinceError,
    parse_since,
    since_of,
    start_of,
)
from ssegate.kafka.times import PartitionTime

NOW = int(datetime(2026, 11, 28, 12, 0, tzinfo=UTC).timestamp() * 1000)
T = int(datetime(2026, 11, 28, 10, 0, tzinfo=UTC).timestamp() * 1000)


def parsed(text: str) -> Since | None:
    return parse_since([text], NOW)


def test_epoch_milliseconds_are_taken_as_they_are() -> None:
    assert parsed(str(T)) == Since(T, future=False)
    assert parsed("0") == Since(0, future=False)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-28T10:00:00Z", T),
        ("2026-11-28t10:00:00z", T),
        ("2026-11-28T11:00:00+01:00", T),
        ("2026-11-28T10:00:00-00:00", T),
        ("2026-11-28T10:00:00.250+00:00", T + 250),
        ("2026-11-28T10:00:00.2Z", T + 200),
        ("2026-11-28T10:00:00.250000001Z", T + 251),
    ],
)
def test_rfc3339_times_become_milliseconds_rounding_sub_millisecond_fractions_up(
    text: str, expected: int
) -> None:
    assert parsed(text) == Since(expected, future=False)


def test_a_time_after_now_within_a_year_is_valid_and_marked_future() -> None:
    assert parsed(str(NOW + 60_000)) == Since(NOW + 60_000, future=True)
    assert parsed("2026-11-28T13:00:00+00:00") == Since(NOW + 3_600_000, future=True)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "is empty"),
        ("-5", "-5 is negative"),
        ("abc", "'abc' is neither epoch milliseconds"),
        ("1.5e12", "is neither"),
        ("+5", "is neither"),
        (" 5", "is neither"),
        ("2026-11-28T10:00:00", "is neither"),  # no offset: RFC 3339 needs one
        ("2026-11-28 10:00:00Z", "is neither"),
        ("2026-W48-6T10:00:00Z", "is neither"),
        ("2026-11-28T10:00:00+01:60", "is neither"),
        ("2026-02-30T10:00:00Z", "is not a valid time: day is out of range for month"),
        ("2026-11-28T10:00:60Z", "is not a valid time: second must be in 0..59"),
        ("1969-12-31T23:59:59Z", "is before 1970-01-01T00:00:00Z"),
        (str(NOW + MAX_AHEAD_MS + 1), "is more than a year after now"),
        (str(NOW * 1000), "is more than a year after now (are these milliseconds?)"),
        ("9999-12-31T23:59:59Z", "is more than a year after now"),
        ("1" * 65, "is 65 bytes, longer than 64"),
        ("é" * 33, "is 66 bytes, longer than 64"),
    ],
)
def test_each_bad_value_is_refused_with_its_reason(text: str, reason: str) -> None:
    with pytest.raises(SinceError) as refused:
        parsed(text)
    assert reason in refused.value.reason


def test_a_value_given_twice_is_refused() -> None:
    with pytest.raises(SinceError) as refused:
        since_of(f"since={T}&since={T}", NOW)
    assert refused.value.reason == "given 2 times; give it once"


def test_the_query_parameter_is_read_url_decoded_among_others() -> None:
    assert since_of("", NOW) is None
    assert since_of("lastEventId=AQIAAg%3D%3D&x=since", NOW) is None
    assert since_of("a=1&since=2026-11-28T11%3A00%3A00%2B01%3A00&b=2", NOW) == Since(T, False)
    assert since_of(f"%73ince={T}", NOW) == Since(T, False)


def test_the_start_is_the_first_offset_at_or_after_the_time_or_the_end_where_none_is() -> None:
    plan = start_of(
        {
            0: PartitionTime(found=7, earliest=3, end=-1),
            1: PartitionTime(found=-1, earliest=-1, end=12),
            2: PartitionTime(found=0, earliest=-1, end=-1),
        }
    )
    assert plan.start == {0: 7, 1: 12, 2: 0}
    assert plan.before_retention == {}


def test_a_time_at_or_before_the_oldest_record_left_after_retention_is_said() -> None:
    plan = start_of({0: PartitionTime(found=5, earliest=5, end=-1)})
    assert plan.start == {0: 5}
    assert plan.before_retention == {0: 5}

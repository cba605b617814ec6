"""h2load's closing report read, and its streams measured against the Python client's."""

from __future__ import annotations

import pytest

from ssegate_lab.bench.h2load import H2loadReport, h2load_delivery, parse_report

REPORT = b"""\
finished in 4.01s, 0.00 req/s, 8.56KB/s
requests: 0 total, 5 started, 0 done, 0 succeeded, 0 failed, 0 errored, 0 timeout
status codes: 4 2xx, 0 3xx, 1 4xx, 0 5xx
traffic: 34.25KB (35075) total, 205B (205) headers (space savings 48.10%), 24.86KB (25460) data
"""


def test_the_closing_report_gives_streams_statuses_and_data_bytes() -> None:
    assert parse_report(REPORT) == H2loadReport(
        started=5, answered_2xx=4, refused=1, failed=0, data_bytes=25460, total_bytes=35075
    )


def test_output_without_a_report_is_refused_naming_what_it_lacks() -> None:
    with pytest.raises(ValueError, match="no requests, statuses, traffic line"):
        parse_report(b"h2load: connection refused\n")


def _figures(data_bytes: int, answered: int = 4) -> dict[str, object]:
    report = H2loadReport(answered, answered, 0, 0, data_bytes, data_bytes + 100)
    return {"streams": 4, "cpu_s": 0.1, "wall_s": 5.0, "report": report}


def test_streams_that_read_the_python_streams_bytes_each_are_complete() -> None:
    """Ten Python streams read 100 events, 3,000 bytes each: four h2load streams owe 12,000."""
    measured = h2load_delivery(_figures(12_000), 30_000, 10, 1000)
    assert (measured["data_bytes_owed"], measured["events_estimated"]) == (12_000, 400)
    assert measured["complete"] is True and "report" not in measured


def test_streams_short_of_their_bytes_are_incomplete_and_carry_fewer_events() -> None:
    measured = h2load_delivery(_figures(11_700), 30_000, 10, 1000)
    assert measured["complete"] is False and measured["events_estimated"] == 390
    unanswered = h2load_delivery(_figures(9_000, answered=3), 30_000, 10, 1000)
    assert unanswered["data_bytes_owed"] == 9_000 and unanswered["complete"] is False


def test_no_report_is_no_stream_opened() -> None:
    measured = h2load_delivery({"streams": 4, "error": "h2load wrote nothing"}, 30_000, 10, 1000)
    assert (measured["opened"], measured["complete"], measured["events_estimated"]) == (0, False, 0)

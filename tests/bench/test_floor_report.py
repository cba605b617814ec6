"""ssegate ÷ the reference server's floor: CPU per delivery and p99 ratios, and their verdicts."""

from __future__ import annotations

from typing import Any

from ssegate_lab.bench.floor import row
from ssegate_lab.bench.floor_report import (
    FLOOR,
    OURS,
    cpu_us_per_delivery,
    floor_target,
    judge,
    pairs,
    ratio,
    table,
)
from ssegate_lab.bench.validity import MET, MISSED, NO_VERDICT, NOT_MEASURED


def case(
    server: str,
    run: int,
    *,
    cpu_us: float,
    p99: float,
    missing: int = 0,
    duplicates: int = 0,
    saturated: bool = False,
    transport: str = "h1",
) -> dict[str, Any]:
    return {
        "server": server,
        "transport": transport,
        "clients": 100,
        "rate": 200.0,
        "run": run,
        "missing": missing,
        "duplicates": duplicates,
        "failed": 0,
        "client_saturated": saturated,
        "client_cpu_share": 0.9 if saturated else 0.3,
        "cpu_us_per_delivery": cpu_us,
        "latency_ms": {"p99": p99},
    }


def runs(ours: tuple[float, float], floor: tuple[float, float], count: int = 3) -> list[Any]:
    rows = []
    for run in range(1, count + 1):
        rows.append(case(OURS, run, cpu_us=ours[0], p99=ours[1]))
        rows.append(case(FLOOR, run, cpu_us=floor[0], p99=floor[1]))
    return rows


def test_cpu_per_delivery_is_server_cpu_over_distinct_deliveries_in_microseconds() -> None:
    assert cpu_us_per_delivery(2.0, 1_000_000) == 2.0
    assert cpu_us_per_delivery(0.5, 0) is None


def test_a_ratio_needs_both_figures_and_a_floor_above_zero() -> None:
    assert ratio(3.0, 2.0) == 1.5
    assert ratio(None, 2.0) is None
    assert ratio(3.0, 0.0) is None


def test_a_case_row_carries_the_server_cpu_under_its_name_and_per_delivery() -> None:
    measured = {
        "distinct": 400_000,
        "gateway_rss_mib": 50.0,
        "cpu_s": {"wall": 4.0, "gateway": 1.2, "upstream": 0.3, "clients": [1.0, 0.5]},
    }
    shaped = row(FLOOR, "tls-h1", 2, measured)
    assert (shaped["server"], shaped["transport"], shaped["run"]) == (FLOOR, "tls-h1", 2)
    assert shaped["cpu_s"]["server"] == 1.2 and "gateway" not in shaped["cpu_s"]
    assert shaped["cpu_us_per_delivery"] == 3.0
    assert shaped["client_cpu_s"] == 1.5
    assert shaped["server_rss_mib"] == 50.0


def test_each_ssegate_case_is_paired_with_the_floor_case_of_the_same_run_and_size() -> None:
    rows = runs((2.3, 3.0), (2.0, 2.0), count=2)
    rows.append(case(OURS, 1, cpu_us=9.0, p99=9.0, transport="tls-h1"))  # no floor beside it
    found = pairs(rows)
    assert [(p["transport"], p["run"]) for p in found] == [("h1", 1), ("h1", 2)]
    assert found[0]["cpu_us_per_delivery"] == {OURS: 2.3, FLOOR: 2.0, "ratio": 1.15}
    assert found[0]["p99_ms"] == {OURS: 3.0, FLOOR: 2.0, "ratio": 1.5}
    assert found[0]["void"] == ""


def test_within_both_limits_over_three_runs_the_target_is_met() -> None:
    [verdict] = judge(pairs(runs((2.3, 3.0), (2.0, 2.0))))
    assert verdict["status"] == MET
    assert "1.15\u00d7" in verdict["measured"] and "1.50\u00d7" in verdict["measured"]


def test_cpu_per_delivery_over_1_15_times_the_floor_misses_the_target() -> None:
    [verdict] = judge(pairs(runs((2.4, 2.0), (2.0, 2.0))))
    assert verdict["status"] == MISSED


def test_p99_over_1_5_times_the_floor_misses_the_target() -> None:
    [verdict] = judge(pairs(runs((2.0, 3.2), (2.0, 2.0))))
    assert verdict["status"] == MISSED


def test_the_verdict_reads_the_median_of_the_runs() -> None:
    rows = runs((2.0, 2.0), (2.0, 2.0))
    rows[0] = case(OURS, 1, cpu_us=9.0, p99=9.0)  # one bad run of three
    [verdict] = judge(pairs(rows))
    assert verdict["status"] == MET


def test_a_floor_that_lost_events_leaves_no_verdict_and_says_so() -> None:
    rows = runs((2.0, 2.0), (2.0, 2.0))
    rows[3] = case(FLOOR, 2, cpu_us=2.0, p99=2.0, missing=7)
    [verdict] = judge(pairs(rows))
    assert verdict["status"] == NO_VERDICT
    assert "floor 7 lost" in verdict["note"]


def test_ssegate_duplicating_events_fails_the_target_as_a_loss() -> None:
    rows = runs((2.0, 2.0), (2.0, 2.0))
    rows[0] = case(OURS, 1, cpu_us=2.0, p99=2.0, duplicates=3)
    [verdict] = judge(pairs(rows))
    assert (verdict["status"], verdict["measured"]) == (MISSED, "loss")
    assert verdict["note"].startswith("run 1 of 3: 3 duplicated")


def test_a_saturated_load_client_leaves_no_verdict() -> None:
    rows = runs((2.0, 2.0), (2.0, 2.0))
    rows[1] = case(FLOOR, 1, cpu_us=2.0, p99=2.0, saturated=True)
    [verdict] = judge(pairs(rows))
    assert verdict["status"] == NO_VERDICT
    assert "load client saturated" in verdict["note"]


def test_fewer_than_three_runs_measure_but_do_not_judge() -> None:
    [verdict] = judge(pairs(runs((2.0, 2.0), (2.0, 2.0), count=2)))
    assert verdict["status"] == NOT_MEASURED
    assert "2 run(s)" in verdict["note"]


def test_the_table_has_a_line_per_pair_and_per_verdict() -> None:
    found = pairs(runs((2.3, 3.0), (2.0, 2.0)))
    lines = table(found, judge(found)).splitlines()
    assert len(lines) == 1 + 3 + 1
    assert lines[1].startswith("h1 100 200 1 | 2.3 2.0 1.15 | 3.0 2.0 1.5")


def _floor_step(duration: float, *pairs_found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``floor`` step's results in ``bench all``: one result, its pairs as given."""
    return [{"duration_s": duration, "pairs": [p for found in pairs_found for p in found]}]


def test_bench_all_judges_each_stated_size_from_the_floor_steps_pairs() -> None:
    within, over = pairs(runs((2.2, 3.0), (2.0, 2.5))), pairs(runs((2.6, 3.0), (2.0, 2.5)))
    assert floor_target("h1", 100, 200.0)(_floor_step(5.0, within)).status == MET
    verdict = floor_target("h1", 100, 200.0)(_floor_step(5.0, over))
    assert verdict.status == MISSED
    assert "1.30\u00d7" in verdict.measured


def test_a_size_or_transport_the_step_did_not_run_is_not_measured_and_named() -> None:
    found = pairs(runs((2.2, 3.0), (2.0, 2.5)))
    for judged in (floor_target("h1", 10_000, 2.0), floor_target("tls-h1", 100, 200.0)):
        verdict = judged(_floor_step(5.0, found))
        assert verdict.status == NOT_MEASURED
        assert verdict.note.startswith("no ")


def test_pairs_shorter_than_the_pages_command_show_their_ratios_and_judge_nothing() -> None:
    verdict = floor_target("h1", 100, 200.0)(_floor_step(3.0, pairs(runs((2.2, 3.0), (2.0, 2.5)))))
    assert verdict.status == NOT_MEASURED
    assert verdict.note == "at 3 s of publishing: the target's is 5 s of publishing"
    assert verdict.measured.startswith("CPU 1.1\u00d7")


def test_a_floor_step_pair_in_which_ssegate_lost_events_fails_the_target() -> None:
    found = pairs([*runs((2.2, 3.0), (2.0, 2.5), count=2),
                   case(OURS, 3, cpu_us=2.2, p99=3.0, missing=5),
                   case(FLOOR, 3, cpu_us=2.0, p99=2.5)])  # fmt: skip
    verdict = floor_target("h1", 100, 200.0)(_floor_step(5.0, found))
    assert (verdict.status, verdict.measured) == (MISSED, "loss")

"""The performance targets judged against scenario results shaped as the scenarios write them:
the median of three runs, a loss fails a target, a saturated client voids it."""

from __future__ import annotations

from typing import Any

from ssegate_lab.bench.suite_judges import KeyedSize, keyed
from ssegate_lab.bench.suite_report import judge_targets, markdown

ALL_OK = {
    name: "ok"
    for name in ("idle", "kafka", "kafka-throughput", "kafka-light", "proxy", "fanout", "static")
}
MILLION = "≥ 1,000,000 events/s delivered at 1,000 subscribers"
MILLION_P99 = "p99 ≤ 50 ms at that load"
LIGHT_KAFKA = "p99 ≤ 10 ms at light load (100 clients, 100 events/s), Kafka → SSE"
MERCURE_THROUGHPUT = "≥ 1.0\u00d7 Mercure's throughput at equal p99"
MERCURE_MEMORY = "≤ 1.0\u00d7 Mercure's memory per connection"


def _verdicts(
    results: dict[str, list[dict[str, Any]]], steps: dict[str, str] = ALL_OK
) -> dict[str, Any]:
    return {verdict["target"]: verdict for verdict in judge_targets(results, steps)}


def _idle(held: int, processes: int, costs: tuple[int, ...] = (2179, 2200, 2150)) -> dict[str, Any]:
    notes = [f"one process may hold at most 19,744 connections here ({processes} workers)"]
    runs = [
        {"asked": held, "opened": held, "complete": True, "held_by_gateway": held,
         "bytes_per_connection": cost}
        for cost in costs
    ]  # fmt: skip
    return {
        "plan": {"plain": {"notes": notes if processes > 1 else []}},
        "plain": {
            "asked": held,
            "held_by_gateway": held,
            "gateway_processes": processes,
            "bytes_per_connection": sorted(costs)[len(costs) // 2],
            "each_run": runs,
        },
    }


def _kafka_case(
    clients: int, rate: int, delivered: float, p99: float, **more: Any
) -> dict[str, Any]:
    offered = float(clients * rate)
    return {
        "server": "ssegate", "clients": clients, "rate": rate, "offered_events_per_s": offered,
        "delivered_events_per_s": delivered, "latency_ms": {"p50": p99 / 2, "p99": p99},
        "missing": 0, "duplicates": 0, "failed": 0, "closed_early": 0,
        "client_cpu_share": 0.4, "client_saturated": False,
    } | more  # fmt: skip


def _runs(*cases: dict[str, Any], duration: float = 5.0) -> list[dict[str, Any]]:
    """One result per case: each case is one run of the step, ``duration`` s of load."""
    return [{"duration_s": duration, "cases": [case]} for case in cases]


def test_100k_held_by_several_processes_is_not_counted_as_one_process_and_says_why() -> None:
    held = _verdicts({"idle": [_idle(100_000, 6)]})
    verdict = held["≥ 100,000 idle connections held by one gateway process"]
    assert verdict["status"] == "not measured" and "19,744" in verdict["note"]
    assert held["RSS per idle plain connection ≤ 4 KiB"]["status"] == "met"
    one = _verdicts({"idle": [_idle(100_000, 1)]})
    assert one["≥ 100,000 idle connections held by one gateway process"]["status"] == "met"


def test_a_cost_is_the_median_of_the_runs_and_a_handful_of_connections_judges_nothing() -> None:
    over = _verdicts({"idle": [_idle(10_000, 1, costs=(5000, 3000, 5200))]})
    verdict = over["RSS per idle plain connection ≤ 4 KiB"]
    assert (verdict["status"], verdict["measured"]) == ("missed", "4.9 KiB (5,000 B)")
    assert "median of 3 runs" in verdict["note"]
    few = _verdicts({"idle": [_idle(50, 1)]})["RSS per idle plain connection ≤ 4 KiB"]
    assert few["status"] == "not measured"


def test_one_run_is_not_a_verdict_but_its_figure_is_shown() -> None:
    verdict = _verdicts({"idle": [_idle(10_000, 1, costs=(2179,))]})[
        "RSS per idle plain connection ≤ 4 KiB"
    ]
    assert (verdict["status"], verdict["measured"]) == ("not measured", "2.1 KiB (2,179 B)")
    assert "a verdict takes the median of 3" in verdict["note"]


def test_the_million_is_judged_on_the_median_run_not_the_best() -> None:
    runs = _runs(
        _kafka_case(1000, 1100, 1.05e6, 30.0),
        _kafka_case(1000, 1100, 0.90e6, 40.0),
        _kafka_case(1000, 1100, 0.95e6, 45.0),
    )
    verdicts = _verdicts({"kafka-throughput": runs})
    assert (verdicts[MILLION]["status"], verdicts[MILLION]["measured"]) == (
        "missed",
        "950,000 ev/s",
    )
    assert (verdicts[MILLION_P99]["status"], verdicts[MILLION_P99]["measured"]) == (
        "met",
        "40.0 ms",
    )


def test_a_run_with_a_loss_fails_the_target_and_is_reported_as_a_loss() -> None:
    runs = _runs(
        _kafka_case(1000, 1100, 1.09e6, 30.0),
        _kafka_case(1000, 1100, 1.08e6, 30.0, missing=1200, duplicates=40),
        _kafka_case(1000, 1100, 1.09e6, 30.0),
    )
    verdict = _verdicts({"kafka-throughput": runs})[MILLION]
    assert (verdict["status"], verdict["measured"]) == ("missed", "loss")
    assert "run 2 of 3: 1,200 lost, 40 duplicated" in verdict["note"]


def test_a_saturated_load_client_makes_no_verdict() -> None:
    saturated = _kafka_case(1000, 1100, 1.09e6, 30.0, client_saturated=True, client_cpu_share=0.97)
    runs = _runs(_kafka_case(1000, 1100, 1.09e6, 30.0), saturated, saturated)
    verdict = _verdicts({"kafka-throughput": runs})[MILLION]
    assert verdict["status"] == "no verdict"
    assert (
        "run 2 of 3: load client saturated (97% of a core); not a valid verdict" in verdict["note"]
    )


def test_a_million_is_judged_only_where_a_million_was_offered() -> None:
    light = _runs(*[_kafka_case(100, 100, 9_990, 8.0)] * 3, duration=10.0)
    verdicts = _verdicts({"kafka-light": light})
    assert (verdicts[LIGHT_KAFKA]["status"], verdicts[LIGHT_KAFKA]["measured"]) == (
        "met",
        "8.0 ms at 9,990 ev/s",
    )
    slower = _verdicts({"kafka-light": _runs(*[_kafka_case(100, 100, 9_990, 14.0)] * 3,
                                             duration=10.0)})  # fmt: skip
    assert slower[LIGHT_KAFKA]["status"] == "missed"  # 10 ms since the write path targets
    short = _runs(*[_kafka_case(1000, 200, 2e5, 40.0)] * 3)
    verdict = _verdicts({"kafka-throughput": short})[MILLION_P99]
    assert verdict["status"] == "not measured" and "less than 1M" in verdict["note"]


def test_the_million_p99_is_judged_on_the_upper_bound_and_names_the_sampled_estimate() -> None:
    case = _kafka_case(1000, 1100, 1.09e6, 90.0) | {"latency_ms_sampled": {"p99": 45.0}}
    verdict = _verdicts({"kafka-throughput": _runs(case, case, case)})[MILLION_P99]
    assert (verdict["status"], verdict["measured"]) == ("missed", "90.0 ms")
    assert "sampled estimate 45.0 ms" in verdict["note"]


def test_kafkasse_measured_below_1000_clients_shows_its_ratio_but_is_not_judged() -> None:
    result = {"kafkasse": {"ratio_ssegate_over_kafkasse": [
        {"clients": 1, "delivered_events_per_s": 1.3},
        {"clients": 100, "delivered_events_per_s": 15.07},
    ]}}  # fmt: skip
    verdict = _verdicts({"kafka": [result] * 3})[
        "≥ 10\u00d7 KafkaSSE's delivered events/s at 1,000 clients"
    ]
    assert verdict["status"] == "not measured"
    assert verdict["measured"] == "15.1\u00d7 at 100 clients"


def _fanout(status: str, ratio: float | None, memory: float = 0.8) -> dict[str, Any]:
    step = {"rate": 200.0, "client_saturated": False, "publisher": {"rate": 200.0, "written": 600}}
    return {
        "ladder": [{"server": "ssegate", "steps": [step]}, {"server": "mercure", "steps": [step]}],
        "ratios": {
            "throughput_at_p99_target": ratio,
            "throughput_at_p99_target_status": status,
            "throughput_at_p99_target_note": "ssegate 0 ev/s",
            "memory_per_idle_connection": memory,
        },
        "idle": [{"server": "ssegate", "failed": 0}, {"server": "mercure", "failed": 0}],
    }


def test_mercure_ratios_are_medians_and_passing_no_rung_is_missed_not_unmeasured() -> None:
    runs = [_fanout("met", 1.4), _fanout("missed", 0.95), _fanout("met", 1.2, memory=1.2)]
    verdicts = _verdicts({"fanout": runs})
    assert (verdicts[MERCURE_THROUGHPUT]["status"], verdicts[MERCURE_THROUGHPUT]["measured"]) == (
        "met",
        "1.20\u00d7",
    )
    assert verdicts[MERCURE_MEMORY]["status"] == "met"  # median 0.8
    none_passed = _verdicts({"fanout": [_fanout("missed", 0.0)] * 3})[MERCURE_THROUGHPUT]
    assert (none_passed["status"], none_passed["measured"]) == ("missed", "0.00\u00d7")


def test_a_failed_mercure_build_is_named() -> None:
    failed = {"ratios": {}, "mercure": {"build": "go is not on PATH"}}
    verdict = _verdicts({"fanout": [failed] * 3})[MERCURE_MEMORY]
    assert (verdict["status"], verdict["note"]) == ("not measured", "Mercure: go is not on PATH")


def test_a_target_whose_step_did_not_end_ok_names_the_step_status() -> None:
    steps = {**ALL_OK, "fanout": "timed_out"}
    verdict = _verdicts({}, steps)[MERCURE_THROUGHPUT]
    assert (verdict["status"], verdict["note"]) == ("not measured", "step fanout: timed_out")


def test_the_page_puts_each_figure_beside_its_target_and_lists_the_steps() -> None:
    summary = {
        "profile": "quick",
        "started_utc": "2026-01-01T00:00:00Z",
        "seconds": 12.0,
        "bound_s": 330.0,
        "machine": {"cpus": 2},
        "targets": judge_targets({"idle": [_idle(100_000, 1)]}, {"idle": "ok"}),
        "steps": [
            {"name": "idle", "status": "ok", "seconds": 40.2, "result_file": "all-x/idle.json",
             "headlines": {"plain_bytes_per_connection": 2179}},
            {"name": "fanout", "status": "not available", "reason": "no 'fanout' scenario"},
        ],
    }  # fmt: skip
    page = markdown(summary)
    assert "| RSS per idle plain connection ≤ 4 KiB | 2.1 KiB (2,179 B) | **met** |" in page
    assert "| fanout | not available | 0 | no 'fanout' scenario |" in page
    assert "| idle | plain_bytes_per_connection | 2,179 |" in page


def test_the_keyed_target_needs_three_complete_runs_as_well_as_the_figures() -> None:
    case = {
        "gateway": "ssegate", "streams": 19_000, "lost": 0, "duplicates": 0, "failed": 0,
        "closed_early": 0, "latency_ms": {"p99": 60.0}, "gateway_cpu_share": 0.1,
        "client_saturated": False,
    }  # fmt: skip
    _keyed = keyed(KeyedSize(19_000, 1000, 60.0), 100, cpu_share=0.5)
    run = {"rate": 1000.0, "duration_s": 60.0}
    assert _keyed([run | {"cases": [case] * 3}]).status == "met"
    assert _keyed([run | {"cases": [case]}]).status == "not measured"
    lossy = _keyed([run | {"cases": [case, case | {"lost": 3}, case]}])
    assert (lossy.status, lossy.note) == ("missed", "run 2 of 3: 3 lost; every run complete")
    small = [run | {"cases": [case | {"streams": 1000}] * 3}]
    assert _keyed(small).status == "not measured"

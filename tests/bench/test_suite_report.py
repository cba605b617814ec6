"""The performance targets judged against scenario results shaped as the scenarios write them."""

from __future__ import annotations

from typing import Any

from ssegate.bench.suite_report import judge_targets, markdown

ALL_OK = {name: "ok" for name in ("idle", "kafka", "kafka-throughput", "proxy", "fanout", "static")}


def _verdicts(results: dict[str, dict[str, Any]], steps: dict[str, str] = ALL_OK) -> dict[str, Any]:
    return {verdict["target"]: verdict for verdict in judge_targets(results, steps)}


def _idle(held: int, processes: int, cost: int = 2179) -> dict[str, Any]:
    notes = [f"one process may hold at most 19,744 connections here ({processes} workers)"]
    return {
        "plan": {"plain": {"notes": notes if processes > 1 else []}},
        "plain": {
            "asked": held,
            "held_by_gateway": held,
            "gateway_processes": processes,
            "bytes_per_connection": cost,
            "bytes_per_connection_runs": [cost],
        },
    }


def _kafka_case(clients: int, rate: int, delivered: float, p99: float) -> dict[str, Any]:
    return {
        "server": "ssegate",
        "clients": clients,
        "rate": rate,
        "offered_events_per_s": float(clients * rate),
        "delivered_events_per_s": delivered,
        "latency_ms": {"p50": p99 / 2, "p99": p99},
    }


def test_100k_held_by_several_processes_is_not_counted_as_one_process_and_says_why() -> None:
    held = _verdicts({"idle": _idle(100_000, 6)})
    verdict = held["≥ 100,000 idle connections held by one gateway process"]
    assert verdict["status"] == "not measured" and "19,744" in verdict["note"]
    assert held["RSS per idle plain connection ≤ 4 KiB"]["status"] == "met"
    one = _verdicts({"idle": _idle(100_000, 1)})
    assert one["≥ 100,000 idle connections held by one gateway process"]["status"] == "met"


def test_a_cost_over_the_target_is_missed_and_a_handful_of_connections_judges_nothing() -> None:
    over = _verdicts({"idle": _idle(10_000, 1, cost=5000)})["RSS per idle plain connection ≤ 4 KiB"]
    assert (over["status"], over["measured"]) == ("missed", "4.9 KiB (5,000 B)")
    few = _verdicts({"idle": _idle(50, 1)})["RSS per idle plain connection ≤ 4 KiB"]
    assert few["status"] == "not measured"


def test_a_million_per_second_is_judged_only_where_a_million_was_offered() -> None:
    enough = {"cases": [_kafka_case(100, 100, 9_990, 14.0), _kafka_case(1000, 1100, 1.05e6, 60.0)]}
    verdicts = _verdicts({"kafka-throughput": enough, "kafka": enough})
    assert verdicts["≥ 1,000,000 events/s delivered at 1,000 subscribers"]["status"] == "met"
    assert verdicts["p99 ≤ 50 ms at that load"]["status"] == "missed"
    light = verdicts["p99 ≤ 20 ms at light load (100 clients, 100 events/s), Kafka → SSE"]
    assert (light["status"], light["measured"]) == ("met", "14.0 ms")
    short = {"cases": [_kafka_case(1000, 200, 2e5, 40.0)]}
    verdict = _verdicts({"kafka-throughput": short})["p99 ≤ 50 ms at that load"]
    assert verdict["status"] == "not measured"


def test_the_million_p99_is_judged_on_the_upper_bound_and_names_the_sampled_estimate() -> None:
    case = _kafka_case(1000, 1100, 1.09e6, 90.0) | {"latency_ms_sampled": {"p99": 45.0}}
    verdict = _verdicts({"kafka-throughput": {"cases": [case]}})["p99 ≤ 50 ms at that load"]
    assert (verdict["status"], verdict["measured"]) == ("missed", "90.0 ms")
    assert "sampled estimate 45.0 ms" in verdict["note"]


def test_kafkasse_measured_below_1000_clients_shows_its_ratio_but_is_not_judged() -> None:
    result = {"kafkasse": {"ratio_ssegate_over_kafkasse": [
        {"clients": 1, "delivered_events_per_s": 1.3},
        {"clients": 100, "delivered_events_per_s": 15.07},
    ]}}  # fmt: skip
    verdict = _verdicts({"kafka": result})[
        "≥ 10\u00d7 KafkaSSE's delivered events/s at 1,000 clients"
    ]
    assert verdict["status"] == "not measured"
    assert verdict["measured"] == "15.1\u00d7 at 100 clients"


def test_mercure_ratios_are_judged_and_a_failed_build_is_named() -> None:
    ratios = {"throughput_at_p99_target": 1.4, "memory_per_idle_connection": 1.2}
    verdicts = _verdicts({"fanout": {"ratios": ratios}})
    assert verdicts["≥ 1.0\u00d7 Mercure's throughput at equal p99"]["status"] == "met"
    assert verdicts["≤ 1.0\u00d7 Mercure's memory per connection"]["status"] == "missed"
    failed = {"ratios": {}, "mercure": {"build": "go is not on PATH"}}
    verdict = _verdicts({"fanout": failed})["≤ 1.0\u00d7 Mercure's memory per connection"]
    assert (verdict["status"], verdict["note"]) == ("not measured", "Mercure: go is not on PATH")


def test_a_target_whose_step_did_not_end_ok_names_the_step_status() -> None:
    steps = {**ALL_OK, "fanout": "timed_out"}
    verdict = _verdicts({}, steps)["≥ 1.0\u00d7 Mercure's throughput at equal p99"]
    assert (verdict["status"], verdict["note"]) == ("not measured", "step fanout: timed_out")


def test_the_page_puts_each_figure_beside_its_target_and_lists_the_steps() -> None:
    summary = {
        "profile": "quick",
        "started_utc": "2026-01-01T00:00:00Z",
        "seconds": 12.0,
        "bound_s": 330.0,
        "machine": {"cpus": 2},
        "targets": judge_targets({"idle": _idle(100_000, 1)}, {"idle": "ok"}),
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


def test_the_keyed_target_needs_every_run_complete_as_well_as_the_figures() -> None:
    from ssegate.bench.suite_report import _keyed

    row = {
        "gateway": "ssegate", "streams": 19_000, "runs": 3, "all_complete": True, "lost": 0,
        "duplicates": 0, "p99_ms_median": 60.0, "gateway_cpu_share_median": 0.1,
    }  # fmt: skip
    assert _keyed({"rate": 1000.0, "summary": [row]}).status == "met"
    lossy = {**row, "all_complete": False, "lost": 3}
    assert _keyed({"rate": 1000.0, "summary": [lossy]}).status == "missed"
    assert _keyed({"rate": 1000.0, "summary": [{**row, "streams": 1000}]}).status == "not measured"

"""The p99 ladder: a climb over coarse rungs, bisected to 10 %, and two ladders compared."""

from __future__ import annotations

from typing import Any

from ssegate_lab.bench.fanout import _outcome
from ssegate_lab.bench.fanout_report import ratios
from ssegate_lab.bench.ladder import FAILED, INVALID, PASSED, RESOLUTION, climb, compare

QUICK_RUNGS = [200.0, 800.0, 3200.0]


def servers_that_sustain(capacity: dict[str, float], invalid_from: float = 1e12) -> Any:
    """A fake step: a server passes every rate up to its capacity."""
    calls: list[tuple[str, float]] = []

    def measure(server: str, rate: float) -> tuple[dict[str, Any], str, str]:
        calls.append((server, rate))
        if rate >= invalid_from:
            return {"rate": rate}, INVALID, "load client saturated"
        return {"rate": rate}, (PASSED if rate <= capacity[server] else FAILED), ""

    return measure, calls


def test_a_fourfold_grid_is_bisected_until_each_ladder_is_resolved_to_ten_percent() -> None:
    measure, _ = servers_that_sustain({"ssegate": 950.0, "mercure": 1000.0})
    ladders = {
        c.server: c.report() for c in climb(["ssegate", "mercure"], QUICK_RUNGS, measure, 1e9)
    }
    for name, capacity in (("ssegate", 950.0), ("mercure", 1000.0)):
        ladder = ladders[name]
        assert ladder["best_rate"] <= capacity < ladder["first_failed_rate"]
        assert ladder["resolution"] <= RESOLUTION
    # on the grid alone both would stop at 800 and tie at 1.0; resolved, 5 % apart is missed
    judged = compare(ladders["ssegate"], ladders["mercure"], ("ssegate", "Mercure"))
    assert judged.status == "missed" and judged.ratio is not None and judged.ratio < 1.0


def test_servers_take_turns_at_each_rung_while_they_climb() -> None:
    measure, calls = servers_that_sustain({"a": 5000.0, "b": 300.0})
    climb(["a", "b"], QUICK_RUNGS, measure, 1e9)
    assert calls[:4] == [("a", 200.0), ("b", 200.0), ("a", 800.0), ("b", 800.0)]
    assert ("b", 3200.0) not in calls  # b stopped at its first failed rung


def test_a_server_that_passes_no_rung_while_the_other_passes_one_is_missed_at_zero() -> None:
    measure, calls = servers_that_sustain({"ssegate": 5.0, "mercure": 900.0})
    ladders = {
        c.server: c.report() for c in climb(["ssegate", "mercure"], QUICK_RUNGS, measure, 1e9)
    }
    # it went down from the lowest rung, halving, to a sixteenth of it, and passed nothing
    assert [rate for server, rate in calls if server == "ssegate"] == [200, 100, 50, 25, 12]
    assert ladders["ssegate"]["stopped"] == "no rate passed, down to 12 ev/s"
    judged = compare(ladders["ssegate"], ladders["mercure"], ("ssegate", "Mercure"))
    assert (judged.ratio, judged.status) == (0.0, "missed")
    reported = ratios({"cases": [], "idle": [], "ladder": list(ladders.values())})
    assert reported["throughput_at_p99_target"] == 0.0
    assert reported["throughput_at_p99_target_status"] == "missed"


def test_a_peer_that_fails_the_lowest_rung_is_followed_down_until_it_passes_one() -> None:
    measure, calls = servers_that_sustain({"ssegate": 950.0, "mercure": 120.0})
    ladders = {
        c.server: c.report() for c in climb(["ssegate", "mercure"], QUICK_RUNGS, measure, 1e9)
    }
    mercure = ladders["mercure"]
    assert ("mercure", 100.0) in calls  # half the lowest rung, then bisected up to 10 %
    assert mercure["best_rate"] <= 120.0 < mercure["first_failed_rate"] <= 200.0
    assert mercure["resolution"] <= RESOLUTION
    judged = compare(ladders["ssegate"], mercure, ("ssegate", "Mercure"))
    assert judged.status == "met" and judged.ratio is not None
    assert 950.0 / 200.0 < judged.ratio < 950.0 / 100.0  # a finite ratio, from both ceilings


def test_a_peer_that_passes_nothing_down_to_the_floor_gives_no_ratio_and_no_verdict() -> None:
    """The old comparison called this met, with an infinite ratio."""
    measure, _ = servers_that_sustain({"ssegate": 950.0, "mercure": 1.0})
    ladders = {
        c.server: c.report() for c in climb(["ssegate", "mercure"], QUICK_RUNGS, measure, 1e9)
    }
    judged = compare(ladders["ssegate"], ladders["mercure"], ("ssegate", "Mercure"))
    assert (judged.ratio, judged.status) == (None, "no verdict")
    assert judged.note.startswith("Mercure passed no rate (no rate passed, down to 12 ev/s)")
    reported = ratios({"cases": [], "idle": [], "ladder": list(ladders.values())})
    assert reported["throughput_at_p99_target"] is None
    assert reported["throughput_at_p99_target_status"] == "no verdict"


def test_each_ladder_says_truly_why_it_stopped() -> None:
    measure, _ = servers_that_sustain({"a": 950.0, "b": 1e9})
    reports = {c.server: c.report() for c in climb(["a", "b"], QUICK_RUNGS, measure, 1e9)}
    resolved = reports["a"]
    assert resolved["stopped"] == (
        f"resolved: {resolved['best_rate']:g} ev/s passed,"
        f" {resolved['first_failed_rate']:g} ev/s failed"
    )
    assert reports["b"]["stopped"] == (
        "every rate passed, up to 3200 ev/s: the ceiling is above the rungs"
    )
    # a time budget spent stops only the ladders that still had a step to take
    ticks = iter(range(1000))
    measure, _ = servers_that_sustain({"a": 950.0, "b": 1e9})
    cut = {
        c.server: c.report()
        for c in climb(["a", "b"], QUICK_RUNGS, measure, 5.5, clock=lambda: next(ticks))
    }
    assert cut["a"]["stopped"] == "time budget of 6 s spent"
    assert cut["b"]["stopped"].startswith("every rate passed")


def _row(**changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "latency_ms": {"p99": 10.0}, "missing": 0, "duplicates": 0, "failed": 0,
        "closed_early": 0, "client_saturated": False, "client_cpu_share": 0.3,
        "publisher_cpu_share": 0.2,
        "publisher": {"rate": 100.0, "achieved_events_per_s": 100.0, "refused": 0},
    }  # fmt: skip
    return row | changes


def test_a_step_passes_only_complete_within_target_and_is_invalid_when_a_client_saturates() -> None:
    assert _outcome(_row()) == (PASSED, "")
    assert _outcome(_row(duplicates=20)) == (FAILED, "20 duplicated")
    assert _outcome(_row(latency_ms={"p99": 80.0}))[0] == FAILED
    saturated = _outcome(_row(client_saturated=True, client_cpu_share=0.93, duplicates=5))
    assert saturated == (INVALID, "load client saturated (93% of a core)")
    assert _outcome(_row(publisher_cpu_share=0.95))[0] == INVALID

"""A verdict from several runs: a loss fails, a saturated client leaves no verdict, the median
judges."""

from __future__ import annotations

from ssegate_lab.bench.verdict import Judge, Run, decide


def _under(limit: float) -> Judge:
    return lambda medians: (f"{medians['p99']:g} ms", medians["p99"] <= limit)


def test_the_median_of_three_runs_is_judged_not_the_best() -> None:
    runs = [Run({"p99": 10.0}), Run({"p99": 30.0}), Run({"p99": 25.0})]
    verdict = decide(runs, _under(20.0))
    assert (verdict.measured, verdict.status, verdict.note) == (
        "25 ms",
        "missed",
        "median of 3 runs",
    )


def test_a_loss_fails_even_when_the_figures_pass_and_even_beside_a_void_run() -> None:
    runs = [Run({"p99": 1.0}, void="load client saturated"), Run({"p99": 1.0}, ("5 lost",))]
    verdict = decide([*runs, Run({"p99": 1.0})], _under(20.0))
    assert (verdict.measured, verdict.status, verdict.note) == (
        "loss",
        "missed",
        "run 2 of 3: 5 lost",
    )


def test_a_void_run_voids_the_verdict_and_names_its_own_loss() -> None:
    runs = [Run({"p99": 1.0}), Run({"p99": 1.0}, ("5 lost",), "load client saturated")]
    verdict = decide([*runs, Run({"p99": 1.0})], _under(20.0))
    assert verdict.status == "no verdict"  # measured, but it cannot stand: not "not measured"
    assert verdict.note == (
        "run 2 of 3: load client saturated (it also lost: 5 lost); not a valid verdict"
    )


def test_a_run_without_figures_keeps_its_losses_and_fails_the_verdict() -> None:
    runs = [Run({"p99": 5.0})] * 3 + [Run(note="no p99 in the result", losses=("9,000 lost",))]
    verdict = decide(runs, _under(20.0))
    assert (verdict.measured, verdict.status, verdict.note) == (
        "loss",
        "missed",
        "run 4 of 4: 9,000 lost",
    )


def test_runs_that_measured_nothing_count_for_nothing() -> None:
    runs = [Run({"p99": 5.0}), Run(note="another size"), Run({"p99": 7.0})]
    verdict = decide(runs, _under(20.0))
    assert (verdict.measured, verdict.status) == ("6 ms", "not measured")
    assert verdict.note == "2 run(s) measured: a verdict takes the median of 3"
    nothing = decide([Run(note="no case at 1,000 clients", shown="12 ms at 100")], _under(20.0))
    assert (nothing.measured, nothing.status, nothing.note) == (
        "12 ms at 100",
        "not measured",
        "no case at 1,000 clients",
    )

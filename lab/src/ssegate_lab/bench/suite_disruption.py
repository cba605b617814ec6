"""Judges of ``bench all``'s targets on disruptions: clients that never read (``stalled``) and
Kafka leaders killed under load (``failover``).

Both scenarios repeat inside one run (``--repeat``): each repeat, or each case, is a run of
:func:`~ssegate_lab.bench.verdict.decide`. A repeat loses nothing of its live readers, with or
without its figure; one whose load process was saturated in the stalled phase, or that does not
say how busy it was, makes no verdict. A failover case loses, duplicates or reorders nothing and
keeps every stream open and complete, and kills its two leaders; a case that killed fewer
measured no failover. Each takes runs of its target's length at least (the stalled phases, the
seconds streams are watched after a kill).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ssegate_lab.bench.suite_judges import TIMES, Judge, Results, at_size, short_of, short_run
from ssegate_lab.bench.suite_steps import dig, number
from ssegate_lab.bench.validity import NOT_MEASURED, SATURATED_SHARE, losses, median
from ssegate_lab.bench.verdict import Run, Verdict, decide


def _difference(run: dict[str, Any], whole: tuple[str, ...], part: tuple[str, ...]) -> float | None:
    """``whole - part`` of two counts of ``run``; None when either is not there."""
    first, second = number(dig(run, *whole)), number(dig(run, *part))
    return None if first is None or second is None else first - second


def _live_losses(run: dict[str, Any]) -> float | None:
    """The live readers' events lost or duplicated; None when the run does not count them."""
    lost, duplicates = number(dig(run, "live", "lost")), number(dig(run, "live", "duplicates"))
    return None if lost is None or duplicates is None else lost + duplicates


STALLED_FIGURES: dict[str, tuple[Callable[[dict[str, Any]], float | None], str, bool]] = {
    "p99_ratio": (lambda run: number(run.get("p99_ratio")), "live p99 {:.2f}{} baseline", False),
    "rss_ratio": (lambda run: number(run.get("rss_ratio")), "RSS after {:.3f}{} baseline", False),
    "late": (
        lambda run: _difference(
            run, ("stalled_clients", "connected"), ("stalled_clients", "within_bound")
        ),
        "{:,.0f} ended past the bound",
        True,
    ),
    "lost": (_live_losses, "{:,.0f} lost or duplicated", True),
}
"""A stalled run's figure by name: how to read it, how to show it, and whether it must hold in
every run (the worst run is judged) rather than on the median."""


def _stalled_losses(run: dict[str, Any]) -> tuple[str, ...]:
    live = run.get("live") or {}
    found = losses(live)
    short = (live.get("wanted") or 0) - (live.get("opened") or 0)
    if short > 0:
        found.append(f"{short:,} live stream(s) not opened")
    return tuple(found)


def _stalled_void(run: dict[str, Any]) -> str:
    """Why a stalled run cannot judge: its load process (the live readers and the stalled
    clients) was saturated in the stalled phase, or the run does not say how busy it was."""
    share = number(dig(run, "phases", "stalled", "load_cpu_share"))
    if share is None:
        return "the result does not say how busy its load process was in the stalled phase"
    return f"load process saturated ({share:.0%} of a core)" if share > SATURATED_SHARE else ""


def stalled(figure: str, limit: float, *, seconds: float, clients: int = 1000) -> Judge:
    """``figure`` of the ``stalled`` runs at ``clients`` stalled clients (as many connected),
    with baseline and after phases of at least ``seconds``, at most ``limit``.

    Every run is judged for the live readers' completeness, with or without its figure; a run
    whose load process was saturated in the stalled phase, or does not say, voids it."""
    pick, shown, every_run = STALLED_FIGURES[figure]

    def judge(results: Results) -> Verdict:
        runs, values = [], []
        for result in results:
            asked = number(result.get("stalled")) or 0
            for each in result.get("runs", []):
                value = pick(each)
                text = "—" if value is None else shown.format(value, TIMES)
                connected = number(dig(each, "stalled_clients", "connected"))
                if asked < clients or connected is None or connected < clients:
                    have = f"{asked:,.0f} stalled clients"
                    if asked >= clients:
                        have = f"{connected or 0:,.0f} stalled clients connected"
                    runs.append(at_size(text, have, f"{clients:,}"))
                    continue
                short = short_run(result, seconds, text, "of each phase")
                if short is not None:
                    runs.append(short)
                    continue
                lost, void = _stalled_losses(each), _stalled_void(each)
                if value is None:
                    runs.append(Run(note=f"no {figure} in the result", losses=lost, void=void))
                    continue
                values.append(value)
                runs.append(Run({"value": value}, lost, void))
        if not runs:
            return Verdict("—", NOT_MEASURED, "no run in the result")

        def verdict(medians: dict[str, float]) -> tuple[str, bool]:
            value = max(values) if every_run else medians["value"]
            return shown.format(value, TIMES), value <= limit

        context = "in every run" if every_run else ""
        return decide(runs, verdict, context)

    return judge


FAILOVER_KILLS = 2
"""Leaders a ``failover`` case kills: partition 0's, then another partition's."""


def _failover_losses(case: dict[str, Any]) -> tuple[str, ...]:
    words = (("lost", "lost"), ("duplicates", "duplicated"), ("out_of_order", "out of order"),
             ("unexpected", "unexpected"), ("closed_early", "stream(s) closed early"))  # fmt: skip
    found = [f"{case[key]:,} {word}" for key, word in words if case.get(key)]
    streams, complete = number(case.get("streams")), number(case.get("complete"))
    if streams is not None and complete is not None and complete < streams:
        found.append(f"{streams - complete:,.0f} of {streams:,.0f} streams incomplete")
    return tuple(found)


def failover(*, seconds: float, clients: int = 1000) -> Judge:
    """Every ``failover`` case (each killing two leaders) at ``clients`` streams or more, each
    watching its streams for at least ``seconds`` after writes resume (``hold``): none lost,
    duplicated or out of order, no stream closed or left incomplete. A case that killed fewer
    leaders measured no failover (its losses still count). The worst stream's delivery gap
    after a kill is shown, with no target on it."""

    def judge(results: Results) -> Verdict:
        runs, gaps = [], []
        for result in results:
            asked = number(result.get("clients")) or 0
            for case in result.get("cases", []):
                kills = len(case.get("kills") or [])
                if asked < clients:
                    have = f"{asked:,.0f} streams"
                    runs.append(at_size(f"{case.get('lost', '—')} lost", have, f"{clients:,}"))
                    continue
                held = number(result.get("hold"))
                have, want = short_of(held, seconds, "of streams watched after a kill")
                if have:
                    runs.append(at_size(f"{case.get('lost', '—')} lost", have, want))
                    continue
                if kills < FAILOVER_KILLS:
                    why = f"the case killed {kills} of {FAILOVER_KILLS} leaders"
                    runs.append(Run(note=why, losses=_failover_losses(case)))
                    continue
                gap = number(case.get("gap_s"))
                if gap is not None:
                    gaps.append(gap)
                runs.append(Run({"kills": kills}, _failover_losses(case)))
        if not runs:
            return Verdict("—", NOT_MEASURED, "no case in the result")

        def verdict(medians: dict[str, float]) -> tuple[str, bool]:
            shown = "0 lost, 0 duplicated, 0 out of order"
            worst = median(gaps)
            if worst is not None:
                shown += f"; gap after a kill {worst:.1f} s (max {max(gaps):.1f} s)"
            return shown, True

        return decide(runs, verdict, "each case kills two leaders")

    return judge

"""The p99 ladder of the fan-out benchmark: the highest rate each server sustains, to 10 %.

Rates climb the given rungs, the servers taking turns at each rung so that their steps share
the machine's conditions; a server stops climbing at its first failed rung. A server that fails
the lowest rung goes down from it, halving the rate (at most :data:`DOWN_STEPS` times), until a
rate passes: a server that passes no rung has a rate too, or is known to be below the floor.
Then each server that has a passing and a failing rate bisects between them (at their geometric
mean) until the failing rate is within :data:`RESOLUTION` of the passing one, again taking
turns. So a coarse grid still resolves 10 %: "at least Mercure's rate" cannot fall out of a
fourfold step. Each ladder's report says why it stopped: resolved, every rate passed, no rate
passed down to the floor, a step invalid, or the time budget spent.

A step is ``passed``, ``failed`` or ``invalid``: invalid when the load client or the publisher
was saturated, so the step says nothing of the server (:data:`INVALID` ends that server's
climb, its best so far a lower bound). The caller's ``measure`` runs a step and says which.

:func:`compare` judges "ours sustains at least theirs" from two ladders, and says when it
cannot: a ladder whose ceiling was never found, or one not resolved to :data:`RESOLUTION`,
decides only what its bounds decide. Ours passing no rate while theirs passed one has a ratio
of 0: that is missed, not unmeasured. Theirs passing no rate (down to the floor) gives no ratio
at all, whatever ours passed: ``no verdict``, never an infinite ratio and never met.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ssegate_lab.bench.validity import MET, MISSED, NO_VERDICT

RESOLUTION = 1.10
"""A ladder is resolved when its first failing rate is at most this much above its best."""
DOWN_STEPS = 4
"""Halvings below the lowest rung a server that fails it may go (to a sixteenth of it)."""
PASSED, FAILED, INVALID = "passed", "failed", "invalid"
TIMES = "\u00d7"


@dataclass(slots=True)
class Climb:
    """One server's ladder as it goes."""

    server: str
    steps: list[dict[str, Any]] = field(default_factory=list)
    best: dict[str, Any] | None = None
    """The row of the highest rate that passed."""
    first_failed: float | None = None
    stopped: str = ""
    """Why the climb was cut short (a step invalid, the time budget spent); empty otherwise."""
    halvings: int = 0
    """Steps taken below the lowest rung."""

    @property
    def best_rate(self) -> float | None:
        return self.best["rate"] if self.best is not None else None

    def resolved(self) -> bool:
        best, failed = self.best_rate, self.first_failed
        return best is not None and failed is not None and failed <= best * RESOLUTION

    def next_bisection(self) -> float | None:
        """The rate between the best and the first failure, or None when there is none."""
        best, failed = self.best_rate, self.first_failed
        if best is None or failed is None or self.resolved() or self.stopped:
            return None
        middle = float(round(math.sqrt(best * failed)))
        return middle if best < middle < failed else None

    def next_below(self) -> float | None:
        """Half the lowest failed rate while nothing has passed, or None."""
        if self.best is not None or self.first_failed is None or self.stopped:
            return None
        if self.halvings >= DOWN_STEPS:
            return None
        lower = float(round(self.first_failed / 2))
        return lower if lower >= 1 else None

    def why_stopped(self) -> str:
        """Why the ladder ended where it did, in words."""
        if self.stopped:
            return self.stopped
        best, failed = self.best_rate, self.first_failed
        if best is None and failed is None:
            return "no rate measured"
        if failed is None:
            return f"every rate passed, up to {best:g} ev/s: the ceiling is above the rungs"
        if best is None:
            return f"no rate passed, down to {failed:g} ev/s"
        if self.resolved():
            return f"resolved: {best:g} ev/s passed, {failed:g} ev/s failed"
        return f"{best:g} ev/s passed, {failed:g} ev/s failed: no rate between them to try"

    def report(self) -> dict[str, Any]:
        best, failed = self.best_rate, self.first_failed
        return {
            "server": self.server,
            "steps": self.steps,
            "stopped": self.why_stopped(),
            "best_rate": best,
            "first_failed_rate": failed,
            "resolution": round(failed / best, 3) if best and failed else None,
            "ceiling_found": failed is not None,
        }


Measure = Callable[[str, float], tuple[dict[str, Any], str, str]]
"""(server, rate) → (the step's row, passed / failed / invalid, why)."""


def climb(
    servers: list[str],
    rates: list[float],
    measure: Measure,
    budget_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> list[Climb]:
    """Every server's ladder over ``rates``, then bisected, within ``budget_s`` seconds."""
    climbs = {server: Climb(server) for server in servers}
    started = clock()

    def step(ladder: Climb, rate: float) -> None:
        row, result, why = measure(ladder.server, rate)
        ladder.steps.append(row | {"outcome": result, "why": why})
        if result == PASSED:
            if ladder.best is None or rate > ladder.best["rate"]:
                ladder.best = row
        elif result == FAILED:
            if ladder.first_failed is None or rate < ladder.first_failed:
                ladder.first_failed = rate
        else:
            ladder.stopped = f"{rate:g} ev/s invalid: {why}"

    def out_of_time(waiting: list[Climb]) -> bool:
        """Whether the budget is spent; if so, the ladders ``waiting`` for a step say so."""
        if clock() - started <= budget_s:
            return False
        for ladder in waiting:
            ladder.stopped = ladder.stopped or f"time budget of {budget_s:.0f} s spent"
        return True

    for rate in sorted(rates):
        climbing = [c for c in climbs.values() if c.first_failed is None and not c.stopped]
        if not climbing or out_of_time(climbing):
            break
        for ladder in climbing:
            step(ladder, rate)
    for next_rate in (Climb.next_below, Climb.next_bisection):
        while True:
            todo = [(c, wanted) for c in climbs.values() if (wanted := next_rate(c)) is not None]
            if not todo or out_of_time([c for c, _ in todo]):
                break
            for ladder, wanted in todo:
                if next_rate is Climb.next_below:
                    ladder.halvings += 1
                step(ladder, wanted)
    return list(climbs.values())


@dataclass(frozen=True, slots=True)
class Comparison:
    ratio: float | None
    """ours / theirs of the best rates; 0 when ours passed none, None when there is no ratio
    (theirs passed none: a ratio over nothing is no figure)."""
    status: str
    note: str


def compare(ours: dict[str, Any], theirs: dict[str, Any], names: tuple[str, str]) -> Comparison:
    """Does ``ours`` sustain at least ``theirs``? Both are :meth:`Climb.report` dicts."""
    our_name, their_name = names
    our_best, their_best = ours.get("best_rate"), theirs.get("best_rate")
    our_fail, their_fail = ours.get("first_failed_rate"), theirs.get("first_failed_rate")
    if our_best is None and their_best is None:
        return Comparison(None, NO_VERDICT, "neither passed a rate")
    if our_best is None:
        if our_fail is None:
            return Comparison(None, NO_VERDICT, f"{our_name}: {ours.get('stopped')}")
        return Comparison(0.0, MISSED, f"{our_name} passed no rate, {their_name} {their_best:g}")
    if their_best is None:
        why = f"{their_name} passed no rate ({theirs.get('stopped')}), {our_name} {our_best:g}"
        return Comparison(None, NO_VERDICT, f"{why}: no ratio to judge")
    ratio = round(our_best / their_best, 3)
    rates = f"{our_name} {our_best:g} ev/s, {their_name} {their_best:g} ev/s"
    if their_fail is not None and our_best >= their_fail:
        return Comparison(ratio, MET, rates)
    if our_fail is not None and our_fail <= their_best:
        return Comparison(ratio, MISSED, rates)
    if ratio >= 1.0 and their_fail is None:
        why = f"{their_name}'s ceiling was not found ({theirs.get('stopped')})"
        return Comparison(ratio, NO_VERDICT, f"{rates}; {why}")
    if ratio < 1.0 and our_fail is None:
        why = f"{our_name}'s ceiling was not found ({ours.get('stopped')})"
        return Comparison(ratio, NO_VERDICT, f"{rates}; {why}")
    coarse = [
        f"{name} to {report['resolution']:.2f}{TIMES}"
        for name, report in ((our_name, ours), (their_name, theirs))
        if (report.get("resolution") or 1.0) > RESOLUTION
    ]
    if coarse:
        return Comparison(ratio, NO_VERDICT, f"{rates}; resolved only {', '.join(coarse)}")
    return Comparison(ratio, MET if ratio >= 1.0 else MISSED, rates)

"""A target's verdict from several runs (pure): a loss fails it, a void run leaves it without a
verdict, and the rest is judged on the median of at least three runs.

Each run of a step says one :class:`Run` toward a target: the figures it measured, what it
lost (:func:`~ssegate_lab.bench.validity.losses`: events missing, duplicated, misdelivered or
late, streams not opened or closed early), and whether it can judge at all (``void``: its load
client was saturated, or the result does not say, so the figures may be the client's). A run
that lost something keeps its losses even when it measured no figure (a repeat that lost every
event has no p99). :func:`decide` weighs them in this order:

1. a run that lost something and was not void fails the target: ``missed``, shown as a loss;
2. a void run leaves the target without a verdict: ``no verdict``, and the note says why;
3. fewer than :data:`~ssegate_lab.bench.validity.MIN_RUNS` runs measured: ``not measured``, with
   the median of those there are;
4. otherwise the judge reads the median of every figure over the runs: ``met`` or ``missed``.

A run that measured nothing toward the target (another size, another case) says why in its
``note`` and counts in none of these.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ssegate_lab.bench.validity import MET, MIN_RUNS, MISSED, NO_VERDICT, NOT_MEASURED, median


@dataclass(frozen=True, slots=True)
class Verdict:
    measured: str
    status: str
    note: str = ""


@dataclass(frozen=True, slots=True)
class Run:
    """What one run says toward one target."""

    figures: dict[str, float] = field(default_factory=dict)
    """Empty when the run measured nothing toward the target."""
    losses: tuple[str, ...] = ()
    void: str = ""
    """Why this run cannot judge (a saturated client, or one not known not to be); empty when
    it can."""
    note: str = ""
    shown: str = ""
    """What to show when no run measured the target (a figure at another size)."""


Judge = Callable[[dict[str, float]], tuple[str, bool]]
"""The median of every figure → (as shown, whether the target is met)."""


def decide(runs: list[Run], judge: Judge, context: str = "") -> Verdict:
    """The verdict of ``runs`` (in order; "run 2" is the second)."""
    suffix = f"; {context}" if context else ""
    for index, run in enumerate(runs, 1):
        if run.losses and not run.void:
            where = f"run {index} of {len(runs)}"
            return Verdict("loss", MISSED, f"{where}: {', '.join(run.losses)}{suffix}")
    for index, run in enumerate(runs, 1):
        if run.void:
            lost = f" (it also lost: {', '.join(run.losses)})" if run.losses else ""
            why = f"run {index} of {len(runs)}: {run.void}{lost}; not a valid verdict"
            return Verdict("—", NO_VERDICT, why + suffix)
    measured = [run for run in runs if run.figures]
    if not measured:
        note = next((run.note for run in runs if run.note), "nothing measured")
        shown = next((run.shown for run in runs if run.shown), "—")
        return Verdict(shown, NOT_MEASURED, note)
    medians: dict[str, float] = {}
    for name in measured[0].figures:
        value = median(run.figures[name] for run in measured if name in run.figures)
        if value is not None:
            medians[name] = value
    shown, ok = judge(medians)
    if len(measured) < MIN_RUNS:
        why = f"{len(measured)} run(s) measured: a verdict takes the median of {MIN_RUNS}"
        return Verdict(shown, NOT_MEASURED, why + suffix)
    return Verdict(shown, MET if ok else MISSED, f"median of {len(measured)} runs{suffix}")

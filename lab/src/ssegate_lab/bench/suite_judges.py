"""Judges of ``bench all``'s targets on streams under load, one function per shape of target.

Each function takes what a target states (its size, its limit, its shortest run) and returns a
judge: every run's result → :class:`~ssegate_lab.bench.verdict.Verdict`, through
:func:`~ssegate_lab.bench.verdict.decide`, so a run that lost, duplicated, misdelivered or
skipped an event fails the target (whether or not it measured a figure), a run whose load client
was saturated, or does not say, leaves it without a verdict, and the figure judged is the median
of at least three runs. A run at another size than the target's (a quick profile's 1,000
clients against a 10,000 target), or shorter than the target's shortest run (``seconds``:
``duration_s`` in the result, the length each step of a ladder published for, the
pipeline's records), judges nothing: its note gives its size, and its figure is shown.

- :func:`case_figure`: one case of a delivery scenario (``kafka``, ``proxy``), picked by its
  load, and one of its figures against a limit: p99, or gateway CPU per delivery;
- :func:`over_mercure`: a ratio ssegate / Mercure of the ``fanout`` scenario on one transport:
  throughput at equal p99 (its ladder), or p99 at equal load (its pairs);
- :func:`keyed` and :func:`soak`: key-filtered streams (``keyed``) of a :class:`KeyedSize`:
  complete, p99 and CPU; RSS growth over a long run.

The judges of the ``stalled`` and ``failover`` targets are in
:mod:`~ssegate_lab.bench.suite_disruption`, those of the pipeline in
:mod:`~ssegate_lab.bench.suite_pipeline`; both build on the helpers here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ssegate_lab.bench.suite_steps import dig, number
from ssegate_lab.bench.validity import (
    MET,
    NO_VERDICT,
    NOT_MEASURED,
    losses,
    median,
)
from ssegate_lab.bench.verdict import Run, Verdict, decide

TIMES = "\u00d7"
"""The multiplication sign of ratios (written as an escape: it looks like an x)."""

Results = list[dict[str, Any]]
"""A step's results, one per run."""
Judge = Callable[[Results], Verdict]


def count_text(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


UNKNOWN_LOAD = "the result does not say whether its load client was saturated"


def void_of(case: dict[str, Any]) -> str:
    """Why a case cannot judge: its load client was saturated, or the case does not say."""
    if not isinstance(case.get("client_saturated"), bool):
        return UNKNOWN_LOAD
    if case["client_saturated"]:
        share = number(case.get("client_cpu_share")) or 0.0
        return f"load client saturated ({share:.0%} of a core)"
    return ""


def run_of(case: dict[str, Any], figures: dict[str, float]) -> Run:
    return Run(figures, tuple(losses(case)), void_of(case))


def cases_of(result: dict[str, Any], **match: Any) -> list[dict[str, Any]]:
    return [
        case
        for case in result.get("cases", [])
        if all(case.get(key) == value for key, value in match.items())
    ]


def at_size(figure: str, have: str, want: str) -> Run:
    """A run measured at another size than the target's: its figure shown, nothing judged."""
    return Run(note=f"at {have}: the target's is {want}", shown=f"{figure} at {have}")


def _seconds_text(seconds: float) -> str:
    return f"{seconds:,.3g} s" if seconds < 10 else f"{seconds:,.0f} s"


def short_of(lasted: float | None, seconds: float, what: str = "of load") -> tuple[str, str]:
    """(what the run had, what the target asks) when a run of ``lasted`` seconds is shorter
    than the ``seconds`` a target asks, or ``("", "")``; a run whose length the result does not
    give is not known to be long enough."""
    if seconds <= 0 or (lasted is not None and lasted >= seconds):
        return "", ""
    have = "an unknown run length" if lasted is None else f"{_seconds_text(lasted)} {what}"
    return have, f"{_seconds_text(seconds)} {what}"


def short_run(result: dict[str, Any], seconds: float, figure: str, what: str) -> Run | None:
    """A run shorter than ``seconds`` (its ``duration_s``): its figure shown, nothing judged."""
    have, want = short_of(number(result.get("duration_s")), seconds, what)
    return at_size(figure, have, want) if have else None


@dataclass(frozen=True, slots=True)
class Load:
    """The case a target is stated at: ``clients`` streams, each getting ``rate`` events/s, or
    ``deliveries`` events/s in all (clients times rate); ``fields`` a case must also have."""

    clients: int
    rate: float | None = None
    deliveries: float | None = None
    fields: tuple[tuple[str, Any], ...] = ()

    def fits(self, case: dict[str, Any]) -> bool:
        """Whether ``case`` is of this load, whatever its client count."""
        rate, clients = number(case.get("rate")), number(case.get("clients"))
        if rate is None or clients is None:
            return False
        if any(case.get(key) != value for key, value in self.fields):
            return False
        if self.rate is not None and rate != self.rate:
            return False
        return self.deliveries is None or clients * rate == self.deliveries

    def words(self) -> str:
        if self.rate is not None:
            return f"{self.clients:,} clients at {self.rate:,g} ev/s"
        return f"{self.clients:,} clients at {self.deliveries or 0:,.0f} deliveries/s"


def _p99(case: dict[str, Any]) -> float | None:
    return number(dig(case, "latency_ms", "p99"))


def _us_per_delivery(case: dict[str, Any]) -> float | None:
    per_cpu_s = number(case.get("events_per_server_cpu_s"))
    return 1e6 / per_cpu_s if per_cpu_s else None


CASE_FIGURES: dict[str, tuple[Callable[[dict[str, Any]], float | None], str]] = {
    "p99": (_p99, "{:,.1f} ms"),
    "cpu_per_delivery": (_us_per_delivery, "{:.2f} µs of gateway CPU per delivery"),
}
"""A case's figure by name: how to read it, how to show it."""


def case_figure(load: Load, figure: str, limit: float, *, seconds: float) -> Judge:
    """The case of ``load`` in every run of at least ``seconds`` of publishing, its ``figure``
    at most ``limit``.

    Gateway CPU per delivery is the inverse of the case's events per gateway CPU-second. It is
    the cost of single-event deliveries only when every event was written before the next one
    came (the linger is shorter than the interval between messages): a p99 above that interval
    means batches may have joined, which makes deliveries cheaper, so such a figure meets no
    target (it can still miss one)."""
    pick, shown = CASE_FIGURES[figure]

    def judge(results: Results) -> Verdict:
        runs = []
        for result in results:
            fitting = [case for case in result.get("cases", []) if load.fits(case)]
            if not fitting:
                runs.append(Run(note=f"no case of {load.words()}"))
                continue
            exact = [case for case in fitting if case.get("clients") == load.clients]
            case = exact[0] if exact else max(fitting, key=lambda c: c.get("clients") or 0)
            value = pick(case)
            text = "—" if value is None else shown.format(value)
            if not exact:
                have = f"{case.get('clients') or 0:,} clients"
                runs.append(at_size(text, have, f"{load.clients:,}"))
                continue
            short = short_run(result, seconds, text, "of load")
            if short is not None:
                runs.append(short)
                continue
            if value is None:
                runs.append(Run(note=f"no {figure} in the result", losses=tuple(losses(case)),
                                void=void_of(case)))  # fmt: skip
                continue
            delivered = number(case.get("delivered_events_per_s")) or 0.0
            runs.append(run_of(case, {"value": value, "delivered": delivered}))
        verdict = decide(
            runs,
            lambda m: (
                f"{shown.format(m['value'])} at {m['delivered']:,.0f} ev/s",
                m["value"] <= limit,
            ),
        )
        if figure == "cpu_per_delivery" and verdict.status == MET:
            return _single_events(verdict, results, load)
        return verdict

    return judge


def _single_events(verdict: Verdict, results: Results, load: Load) -> Verdict:
    """``verdict`` if the case's events were delivered one per write, else not measured."""
    p99s = [
        _p99(case)
        for result in results
        for case in result.get("cases", [])
        if load.fits(case) and case.get("clients") == load.clients
    ]
    p99 = median(value for value in p99s if value is not None)
    interval = 1000 / load.rate if load.rate else 0.0
    if p99 is not None and p99 <= interval:
        return verdict
    why = (
        f"p99 {p99:,.0f} ms is over the {interval:,.0f} ms between messages"
        if p99 is not None
        else "no p99 in the result"
    )
    return Verdict(verdict.measured, NOT_MEASURED, f"{why}: batches may have joined, so the"
                   f" cost is not of single-event deliveries; {verdict.note}")  # fmt: skip


def no_mercure(result: dict[str, Any], otherwise: str) -> str:
    """Why a fan-out result has no ratio: Mercure's failed build, or ``otherwise``."""
    reason = dig(result, "mercure", "build")
    return f"Mercure: {reason}" if isinstance(reason, str) and reason != "ok" else otherwise


LADDER_TRANSPORT = "h1"
"""The transport a fan-out result's p99 ladder climbed over when the result does not say."""
TRANSPORT_WORDS = {"h1": "plain HTTP/1.1", "tls-h1": "TLS HTTP/1.1", "tls-h2": "TLS h2"}


def _ladder_seconds(result: dict[str, Any]) -> float | None:
    """The longest a step of the result's ladders published for (each writes ``rate`` events/s
    for the ladder's duration), or None when no step says."""
    lengths = [
        written / rate
        for ladder in result.get("ladder") or []
        for step in ladder.get("steps") or []
        if (written := number(dig(step, "publisher", "written"))) is not None
        and (rate := number(dig(step, "publisher", "rate")))
    ]
    return max(lengths, default=None)


def _ladder_void(result: dict[str, Any]) -> str:
    """Why the result's ladders cannot judge: a step that does not say whether its load client
    was saturated (a saturated one ends its ladder, and the comparison says so)."""
    unknown = [
        f"{ladder.get('server')} at {step.get('rate')} ev/s"
        for ladder in result.get("ladder") or []
        for step in ladder.get("steps") or []
        if not isinstance(step.get("client_saturated"), bool)
    ]
    steps = ", ".join(unknown[:3])
    return (
        f"a ladder step ({steps}) does not say whether its load client was saturated"
        if steps
        else ""
    )


def _ladder_ratio(
    result: dict[str, Any], transport: str, seconds: float
) -> tuple[Run, float | None]:
    """ssegate's ladder against Mercure's (:func:`ssegate_lab.bench.ladder.compare`), from a
    run whose ladder climbed over ``transport`` with steps of at least ``seconds``. A
    comparison that decides nothing (a ceiling not found, a ladder not resolved, Mercure passing
    no rate) makes no verdict."""
    climbed = result.get("ladder_transport", LADDER_TRANSPORT)
    if transport != climbed:
        words = TRANSPORT_WORDS.get(climbed, climbed)
        why = f"this run's p99 ladder is over {words} only: no {transport} one"
        return Run(note=why), None
    ratios = result.get("ratios") or {}
    ratio = number(ratios.get("throughput_at_p99_target"))
    status = ratios.get("throughput_at_p99_target_status")
    note = ratios.get("throughput_at_p99_target_note") or ""
    if status is None and ratio is None:
        return Run(note=no_mercure(result, "no ladder ratio")), None
    have, want = short_of(_ladder_seconds(result), seconds, "a step")
    if have:
        return at_size(_ratio_text(ratio), have, want), ratio
    void = _ladder_void(result)
    if void:
        return Run(void=void, note=note), None
    if status in (NOT_MEASURED, NO_VERDICT) or ratio is None:
        return Run(void=note or "the ladders give no ratio"), None
    return Run({"ratio": float(ratio)}, note=note), float(ratio)


def _pair_p99(result: dict[str, Any], transport: str, seconds: float) -> tuple[Run, float | None]:
    """The highest p99 ratio over the transport's pairs (every load must meet the target), from
    pairs of at least ``seconds``; ssegate's losses fail it, a saturated client (or one not
    known not to be) or Mercure's losses void it."""
    pairs = [
        pair
        for pair in dig(result, "ratios", "pairs") or []
        if pair.get("transport") == transport and number(pair.get("p99_ms")) is not None
    ]
    if not pairs:
        return Run(note=no_mercure(result, f"no {transport} pair in the result")), None
    ratio = max(float(pair["p99_ms"]) for pair in pairs)
    short = short_run(result, seconds, _ratio_text(ratio), "of load")
    if short is not None:
        return short, ratio
    ours, theirs = (
        cases_of(result, server="ssegate", transport=transport),
        cases_of(result, server="mercure", transport=transport),
    )
    lost = tuple(loss for case in ours for loss in losses(case))
    voids = list(dict.fromkeys(void_of(case) for case in (*ours, *theirs) if void_of(case)))
    voids += [f"Mercure: {loss}, the pair does not compare" for c in theirs for loss in losses(c)]
    return Run({"ratio": ratio}, lost, "; ".join(voids)), ratio


MERCURE_FIGURES: dict[str, tuple[Callable[..., tuple[Run, float | None]], bool, str]] = {
    "throughput": (_ladder_ratio, True, "ladders resolved to 10 %"),
    "p99": (_pair_p99, False, "the highest over the loads of each run"),
}
"""A ratio by name: how to read it from a run, whether more is better, what it is."""


def over_mercure(
    figure: str, transport: str, limit: float, *, seconds: float, workers: int | None = None
) -> Judge:
    """ssegate / Mercure on ``transport`` (``h1``, ``tls-h1``, ``tls-h2``): at least ``limit``
    for a throughput, at most ``limit`` for a p99, from cases (ladder steps) of at least
    ``seconds``; with ``workers``, only a run whose gateway had that many worker processes
    judges."""
    read, more_is_better, what = MERCURE_FIGURES[figure]

    def judge(results: Results) -> Verdict:
        runs = []
        for result in results:
            run, ratio = read(result, transport, seconds)
            had = result.get("gateway_workers", 1)
            if workers is not None and had != workers:
                run = at_size(_ratio_text(ratio), f"{had} gateway worker(s)", f"{workers}")
            runs.append(run)

        def verdict(medians: dict[str, float]) -> tuple[str, bool]:
            ratio = medians["ratio"]
            met = ratio >= limit if more_is_better else ratio <= limit
            return _ratio_text(ratio), met

        return decide(runs, verdict, f"ssegate / Mercure over {transport}, {what}")

    return judge


def _ratio_text(ratio: float | None) -> str:
    return "no ratio" if ratio is None else f"{ratio:.2f}{TIMES}"


@dataclass(frozen=True, slots=True)
class KeyedSize:
    """What a key-filtered target states: ``streams`` streams (at least), ``rate`` msg/s over at
    most ``keys`` keys (fewer keys owe each stream more), each run producing for ``seconds``."""

    streams: int
    rate: float
    seconds: float
    keys: int | None = None


def _keyed_size(result: dict[str, Any], case: dict[str, Any], size: KeyedSize) -> tuple[str, str]:
    """(what the case had, what the target states) where it falls short of the target's size,
    or ``("", "")``."""
    have = case.get("streams") or 0
    if have < size.streams:
        return f"{have:,} streams", f"{size.streams:,}"
    keys = number(result.get("keys"))
    if size.keys is not None and (keys is None or keys > size.keys):
        had = "an unknown key count" if keys is None else f"{keys:,.0f} keys"
        return had, f"at most {size.keys:,} keys (more owe each stream fewer messages)"
    produced = number(result.get("rate")) or 0
    if produced < size.rate:
        return f"{produced:,.0f} msg/s", f"{size.rate:,.0f}"
    return short_of(number(result.get("duration_s")), size.seconds, "of producing")


def keyed(size: KeyedSize, p99_ms: float, *, cpu_share: float | None = None) -> Judge:
    """Key-filtered streams of ``size``: every run complete (nothing lost, duplicated,
    misdelivered, skipped or late, every stream open to the end), p99 at most ``p99_ms`` (and
    the gateway's CPU at most ``cpu_share`` of a core). Every repeat of the largest case at the
    target's size or more is a run; a repeat without a p99 keeps its losses."""

    def judge(results: Results) -> Verdict:
        runs = []
        for result in results:
            cases = cases_of(result, gateway="ssegate")
            if not cases:
                runs.append(Run(note="no ssegate case in the result"))
                continue
            largest = max(case.get("streams") or 0 for case in cases)
            for case in (c for c in cases if c.get("streams") == largest):
                p99 = _p99(case)
                cpu = number(case.get("gateway_cpu_share"))
                have, want = _keyed_size(result, case, size)
                if have:
                    runs.append(at_size("—" if p99 is None else f"p99 {p99:,.0f} ms", have, want))
                elif p99 is None or cpu is None:
                    runs.append(Run(note="no p99 or CPU in the result",
                                    losses=tuple(losses(case)), void=void_of(case)))  # fmt: skip
                else:
                    runs.append(run_of(case, {"p99": p99, "cpu": cpu}))

        def verdict(medians: dict[str, float]) -> tuple[str, bool]:
            shown = f"p99 {medians['p99']:,.0f} ms"
            if cpu_share is None:
                return shown, medians["p99"] <= p99_ms
            shown += f", CPU {medians['cpu']:.0%} of a core"
            return shown, medians["p99"] <= p99_ms and medians["cpu"] <= cpu_share

        return decide(runs, verdict, "every run complete")

    return judge


def rss_growth(samples: list[list[float]], settled_s: float) -> float | None:
    """The highest RSS after ``settled_s`` over the RSS then, less one (samples: [s, MiB])."""
    after = [mib for at, mib in samples if at >= settled_s]
    return max(after) / after[0] - 1 if after and after[0] > 0 else None


def soak(size: KeyedSize, settled_s: float, growth: float) -> Judge:
    """Key-filtered streams of ``size``: no stream stops (every run complete), and the gateway's
    RSS grows at most ``growth`` after ``settled_s``. A repeat without an RSS sample keeps its
    losses."""

    def judge(results: Results) -> Verdict:
        runs = []
        for result in results:
            for case in cases_of(result, gateway="ssegate"):
                found = rss_growth(case.get("rss_mib_samples") or [], settled_s)
                have, want = _keyed_size(result, case, size)
                if have:
                    fifth = number(case.get("rss_growth_after_first_fifth"))
                    shown = "—" if fifth is None else f"RSS {fifth:+.1%} after the first fifth"
                    runs.append(at_size(shown, have, want))
                elif found is None:
                    why = f"no RSS sample after {settled_s:,.0f} s (--rss-every)"
                    runs.append(Run(note=why, losses=tuple(losses(case)), void=void_of(case)))
                else:
                    runs.append(run_of(case, {"growth": found}))
        if not runs:
            return Verdict("—", NOT_MEASURED, "no ssegate case in the result")
        minutes = f"{settled_s / 60:g} min"
        return decide(
            runs,
            lambda m: (f"RSS {m['growth']:+.1%} after {minutes}", m["growth"] <= growth),
            "every run complete; the highest RSS after the settling time",
        )

    return judge

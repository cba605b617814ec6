"""Judges of ``bench all``'s targets on streams under load, one function per shape of target.

Each function takes what a target states (its size, its limit) and returns a judge: every
run's result → :class:`~ssegate_lab.bench.verdict.Verdict`, through
:func:`~ssegate_lab.bench.verdict.decide`, so a run that lost or duplicated an event fails the
target, a run whose load client was saturated voids it, and the figure judged is the median of
at least three runs. A run at another size than the target's (a quick profile's 1,000 clients
against a 10,000 target) judges nothing: its note gives its size, and its figure is shown.

- :func:`case_figure`: one case of a delivery scenario (``kafka``, ``proxy``), picked by its
  load, and one of its figures against a limit: p99, or gateway CPU per delivery;
- :func:`over_mercure`: a ratio ssegate / Mercure of the ``fanout`` scenario on one transport:
  throughput at equal p99 (its ladder), or p99 at equal load (its pairs);
- :func:`keyed` and :func:`soak`: key-filtered streams (``keyed``): complete, p99 and CPU at a
  size; RSS growth over a long run;
- :func:`stalled`: one figure of the ``stalled`` scenario's runs;
- :func:`failover`: the ``failover`` scenario's cases, each a run: nothing lost, duplicated or
  out of order; the delivery gap shown;
- :func:`pipeline_rate` and :func:`pipeline_latency`: the ``pipeline`` scenario's records/s and
  its produce → SSE client p99 at the default trigger (through the sink topic and a gateway).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ssegate_lab.bench.suite_steps import dig, number
from ssegate_lab.bench.validity import MET, NOT_MEASURED, SATURATED_SHARE, losses, median
from ssegate_lab.bench.verdict import Run, Verdict, decide

TIMES = "\u00d7"
"""The multiplication sign of ratios (written as an escape: it looks like an x)."""

Results = list[dict[str, Any]]
"""A step's results, one per run."""
Judge = Callable[[Results], Verdict]


def count_text(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def void_of(case: dict[str, Any]) -> str:
    """Why a case cannot judge: its load client was saturated."""
    if case.get("client_saturated"):
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


def _at_size(figure: str, have: str, want: str) -> Run:
    """A run measured at another size than the target's: its figure shown, nothing judged."""
    return Run(note=f"at {have}: the target's is {want}", shown=f"{figure} at {have}")


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


def case_figure(load: Load, figure: str, limit: float) -> Judge:
    """The case of ``load`` in every run, its ``figure`` at most ``limit``.

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
            if value is None:
                runs.append(Run(note=f"no {figure} in the result"))
                continue
            if not exact:
                have = f"{case.get('clients') or 0:,} clients"
                runs.append(_at_size(shown.format(value), have, f"{load.clients:,}"))
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


def _ladder_ratio(result: dict[str, Any], transport: str) -> tuple[Run, float | None]:
    """ssegate's ladder against Mercure's (:func:`ssegate_lab.bench.ladder.compare`), from a
    run whose ladder climbed over ``transport``."""
    climbed = result.get("ladder_transport", LADDER_TRANSPORT)
    if transport != climbed:
        words = TRANSPORT_WORDS.get(climbed, climbed)
        why = f"this run's p99 ladder is over {words} only: no {transport} one"
        return Run(note=why), None
    ratios = result.get("ratios") or {}
    ratio = ratios.get("throughput_at_p99_target")
    status = ratios.get("throughput_at_p99_target_status")
    note = ratios.get("throughput_at_p99_target_note") or ""
    if status is None and ratio is None:
        return Run(note=no_mercure(result, "no ladder ratio")), None
    if status == NOT_MEASURED:
        return Run(note=note), None
    value = math.inf if ratio is None else float(ratio)
    return Run({"ratio": value}, note=note), value


def _pair_p99(result: dict[str, Any], transport: str) -> tuple[Run, float | None]:
    """The highest p99 ratio over the transport's pairs (every load must meet the target);
    ssegate's losses fail it, a saturated client or Mercure's losses void it."""
    pairs = [
        pair
        for pair in dig(result, "ratios", "pairs") or []
        if pair.get("transport") == transport and number(pair.get("p99_ms")) is not None
    ]
    if not pairs:
        return Run(note=no_mercure(result, f"no {transport} pair in the result")), None
    ratio = max(float(pair["p99_ms"]) for pair in pairs)
    ours, theirs = (
        cases_of(result, server="ssegate", transport=transport),
        cases_of(result, server="mercure", transport=transport),
    )
    lost = tuple(loss for case in ours for loss in losses(case))
    voids = [void_of(case) for case in (*ours, *theirs) if void_of(case)]
    voids += [f"Mercure: {loss}, the pair does not compare" for c in theirs for loss in losses(c)]
    return Run({"ratio": ratio}, lost, "; ".join(voids)), ratio


MERCURE_FIGURES: dict[str, tuple[Callable[..., tuple[Run, float | None]], bool, str]] = {
    "throughput": (_ladder_ratio, True, "ladders resolved to 10 %"),
    "p99": (_pair_p99, False, "the highest over the loads of each run"),
}
"""A ratio by name: how to read it from a run, whether more is better, what it is."""


def over_mercure(figure: str, transport: str, limit: float, workers: int | None = None) -> Judge:
    """ssegate / Mercure on ``transport`` (``h1``, ``tls-h1``, ``tls-h2``): at least ``limit``
    for a throughput, at most ``limit`` for a p99; with ``workers``, only a run whose gateway
    had that many worker processes judges."""
    read, more_is_better, what = MERCURE_FIGURES[figure]

    def judge(results: Results) -> Verdict:
        runs = []
        for result in results:
            run, ratio = read(result, transport)
            had = result.get("gateway_workers", 1)
            if workers is not None and ratio is not None and had != workers:
                run = _at_size(_ratio_text(ratio), f"{had} gateway worker(s)", f"{workers}")
            runs.append(run)

        def verdict(medians: dict[str, float]) -> tuple[str, bool]:
            ratio = medians["ratio"]
            met = ratio >= limit if more_is_better else ratio <= limit
            return _ratio_text(ratio), met

        return decide(runs, verdict, f"ssegate / Mercure over {transport}, {what}")

    return judge


def _ratio_text(ratio: float) -> str:
    return "Mercure passed no rate" if math.isinf(ratio) else f"{ratio:.2f}{TIMES}"


def _keyed_run(case: dict[str, Any], figures: dict[str, float]) -> Run:
    """A keyed case as a run: its ``lost`` is what the validity rules call ``missing``."""
    return run_of(case | {"missing": case.get("lost", 0)}, figures)


def _keyed_size(
    result: dict[str, Any], case: dict[str, Any], streams: int, rate: float, seconds: float
) -> tuple[str, str]:
    """(what the case had, what the target states) where it falls short of the target's size,
    or ``("", "")``."""
    have = case.get("streams") or 0
    if have < streams:
        return f"{have:,} streams", f"{streams:,}"
    produced = number(result.get("rate")) or 0
    if produced < rate:
        return f"{produced:,.0f} msg/s", f"{rate:,.0f}"
    lasted = number(result.get("duration_s")) or 0
    if lasted < seconds:
        return f"{lasted:,.0f} s of producing", f"{seconds:,.0f} s"
    return "", ""


def keyed(
    streams: int, rate: float, p99_ms: float, *, cpu_share: float | None = None,
    seconds: float = 0.0,
) -> Judge:  # fmt: skip
    """``streams`` key-filtered streams at ``rate`` msg/s (for ``seconds``): every run
    complete, p99 at most ``p99_ms`` (and the gateway's CPU at most ``cpu_share`` of a core).
    Every repeat of the largest case at the target's size or more is a run."""

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
                if p99 is None or cpu is None:
                    runs.append(Run(note="no p99 or CPU in the result"))
                    continue
                have, want = _keyed_size(result, case, streams, rate, seconds)
                if have:
                    runs.append(_at_size(f"p99 {p99:,.0f} ms", have, want))
                    continue
                runs.append(_keyed_run(case, {"p99": p99, "cpu": cpu}))

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


def soak(streams: int, rate: float, seconds: float, settled_s: float, growth: float) -> Judge:
    """``streams`` key-filtered streams at ``rate`` msg/s for ``seconds``: no stream stops
    (every run complete), and the gateway's RSS grows at most ``growth`` after ``settled_s``."""

    def judge(results: Results) -> Verdict:
        runs = []
        for result in results:
            for case in cases_of(result, gateway="ssegate"):
                found = rss_growth(case.get("rss_mib_samples") or [], settled_s)
                have, want = _keyed_size(result, case, streams, rate, seconds)
                if have:
                    fifth = number(case.get("rss_growth_after_first_fifth"))
                    shown = "—" if fifth is None else f"RSS {fifth:+.1%} after the first fifth"
                    runs.append(_at_size(shown, have, want))
                elif found is None:
                    runs.append(Run(note=f"no RSS sample after {settled_s:,.0f} s (--rss-every)"))
                else:
                    runs.append(_keyed_run(case, {"growth": found}))
        if not runs:
            return Verdict("—", NOT_MEASURED, "no ssegate case in the result")
        minutes = f"{settled_s / 60:g} min"
        return decide(
            runs,
            lambda m: (f"RSS {m['growth']:+.1%} after {minutes}", m["growth"] <= growth),
            "every run complete; the highest RSS after the settling time",
        )

    return judge


STALLED_FIGURES: dict[str, tuple[Callable[[dict[str, Any]], float | None], str, bool]] = {
    "p99_ratio": (lambda run: number(run.get("p99_ratio")), "live p99 {:.2f}{} baseline", False),
    "rss_ratio": (lambda run: number(run.get("rss_ratio")), "RSS after {:.3f}{} baseline", False),
    "late": (
        lambda run: (
            (number(dig(run, "stalled_clients", "connected")) or 0)
            - (number(dig(run, "stalled_clients", "within_bound")) or 0)
        ),
        "{:,.0f} ended past the bound",
        True,
    ),
    "lost": (
        lambda run: (
            (number(dig(run, "live", "lost")) or 0) + (number(dig(run, "live", "duplicates")) or 0)
        ),
        "{:,.0f} lost or duplicated",
        True,
    ),
}
"""A stalled run's figure by name: how to read it, how to show it, and whether it must hold in
every run (the worst run is judged) rather than on the median."""


def _stalled_losses(run: dict[str, Any]) -> tuple[str, ...]:
    live = run.get("live") or {}
    found = losses(live | {"missing": live.get("lost", 0)})
    short = (live.get("wanted") or 0) - (live.get("opened") or 0)
    if short > 0:
        found.append(f"{short:,} live stream(s) not opened")
    return tuple(found)


def stalled(figure: str, limit: float, clients: int = 1000) -> Judge:
    """``figure`` of the ``stalled`` runs at ``clients`` stalled clients, at most ``limit``.

    Every run is judged for the live readers' completeness; a run whose load process (the live
    readers and the stalled clients) was saturated in the stalled phase voids it."""
    pick, shown, every_run = STALLED_FIGURES[figure]

    def judge(results: Results) -> Verdict:
        runs, values = [], []
        for result in results:
            asked = number(result.get("stalled")) or 0
            for each in result.get("runs", []):
                value = pick(each)
                if value is None:
                    runs.append(Run(note=f"no {figure} in the result"))
                    continue
                if asked < clients:
                    have = f"{asked:,.0f} stalled clients"
                    runs.append(_at_size(shown.format(value, TIMES), have, f"{clients:,}"))
                    continue
                share = number(dig(each, "phases", "stalled", "load_cpu_share")) or 0.0
                void = f"load process saturated ({share:.0%} of a core)"
                values.append(value)
                runs.append(Run({"value": value}, _stalled_losses(each),
                                void if share > SATURATED_SHARE else ""))  # fmt: skip
        if not runs:
            return Verdict("—", NOT_MEASURED, "no run in the result")

        def verdict(medians: dict[str, float]) -> tuple[str, bool]:
            value = max(values) if every_run else medians["value"]
            return shown.format(value, TIMES), value <= limit

        context = "in every run" if every_run else ""
        return decide(runs, verdict, context)

    return judge


def _failover_losses(case: dict[str, Any]) -> tuple[str, ...]:
    words = (("lost", "lost"), ("duplicates", "duplicated"), ("out_of_order", "out of order"),
             ("unexpected", "unexpected"))  # fmt: skip
    return tuple(f"{case[key]:,} {word}" for key, word in words if case.get(key))


def failover(clients: int = 1000) -> Judge:
    """Every ``failover`` case (each killing two leaders) at ``clients`` streams or more: none
    lost, duplicated or out of order. The worst stream's delivery gap after a kill is shown,
    with no target on it."""

    def judge(results: Results) -> Verdict:
        runs, gaps = [], []
        for result in results:
            asked = number(result.get("clients")) or 0
            for case in result.get("cases", []):
                kills = len(case.get("kills") or [])
                if asked < clients:
                    have = f"{asked:,.0f} streams"
                    runs.append(_at_size(f"{case.get('lost', '—')} lost", have, f"{clients:,}"))
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


PIPELINE_RECORDS = 1_000_000
"""The records a throughput is measured over in ``docs/performance.md``; fewer weigh the
query's start-up more."""


def pipeline_rate(case: str, limit: float, records: int = PIPELINE_RECORDS) -> Judge:
    """Records/s of the pipeline's ``case`` (``stateless``, ``windowed``): at least ``limit``;
    each of the scenario's own runs (``--runs``) is a run."""

    def judge(results: Results) -> Verdict:
        runs = []
        for result in results:
            entry = result.get(case)
            if not isinstance(entry, dict):
                runs.append(Run(note=f"no {case} case in the result"))
                continue
            asked = number(result.get("records")) or 0
            for each in entry.get("runs", []):
                rate = number(each.get("records_per_s"))
                if rate is None:
                    continue
                if asked < records:
                    have = f"{asked:,.0f} records"
                    runs.append(_at_size(f"{rate:,.0f} records/s", have, f"{records:,}"))
                else:
                    runs.append(Run({"rate": rate}))
        if not runs:
            return Verdict("—", NOT_MEASURED, f"no run of {case} in the result")
        return decide(
            runs, lambda m: (f"{m['rate']:,.0f} records/s", m["rate"] >= limit), "each --runs a run"
        )

    return judge


def pipeline_latency(limit_ms: float) -> Judge:
    """p99 of the stateless job at the default trigger, at most ``limit_ms``: produce → SSE
    client (through the sink topic and a gateway), the produce → sink p99 shown beside it. A
    result from before the SSE client was measured is judged on its produce → sink p99, and
    says so. A record that reached the sink and not the client, or came to it twice, is a loss.
    """

    def judge(results: Results) -> Verdict:
        from ssegate.pipeline.config import DEFAULT_TRIGGER
        from ssegate_lab.bench.pipeline import trigger_key

        key = trigger_key(DEFAULT_TRIGGER)
        entries = [dig(result, "latency", key) for result in results]
        runs = [_pipeline_latency_run(entry, key) for entry in entries]
        ran = [e for e in entries if isinstance(e, dict) and e.get("supported") is not False]
        through_sse = bool(ran) and all(isinstance(e.get("sse"), dict) for e in ran)

        def verdict(medians: dict[str, float]) -> tuple[str, bool]:
            shown = f"{medians['p99']:,.0f} ms"
            if "sink_p99" in medians:
                shown += f" (to the sink {medians['sink_p99']:,.0f} ms)"
            return shown, medians["p99"] <= limit_ms

        path = "produce → sink → gateway → SSE client" if through_sse else "produce → sink"
        return decide(runs, verdict, f"{path} at {key}")

    return judge


def _pipeline_latency_run(entry: object, key: str) -> Run:
    """One run of the latency case at ``key``: its p99 to the SSE client (to the sink without
    one), the sink's beside it, and the client's losses."""
    if not isinstance(entry, dict):
        return Run(note=f"no latency case at the default trigger ({key})")
    if entry.get("supported") is False:
        return Run(note=f"{key}: {entry.get('reason')}")
    sink_p99 = number(entry.get("p99_ms"))
    sse = entry.get("sse")
    if not isinstance(sse, dict):
        if sink_p99 is None:
            return Run(note=f"{key}: nothing reached the sink")
        return Run({"p99": sink_p99})
    p99 = number(sse.get("p99_ms"))
    if p99 is None:
        return Run(note=f"{key}: nothing reached the SSE client", losses=tuple(losses(sse)))
    figures = {"p99": p99} | ({"sink_p99": sink_p99} if sink_p99 is not None else {})
    return Run(figures, tuple(losses(sse)))

"""The targets of ssegate's performance issue, judged against one ``bench all`` run, and its report.

Each :class:`Target` names the step whose results answer it and a judge that reads every run's
result and returns a :class:`~ssegate_lab.bench.verdict.Verdict`: what was measured, and ``met``,
``missed`` or ``not measured``. Every judge goes through :func:`~ssegate_lab.bench.verdict.decide`:
a run that lost or duplicated an event (or failed to open a stream) fails the target, a run
whose load client was saturated voids it, and the figure judged is the median of at least
three runs (a step's own runs, or the repeats a scenario makes inside one run: ``idle --runs``,
``keyed --repeat``). A figure measured at another size than the target's (a quick profile's
2,000 connections against a 100,000 target) is ``not measured``, with the size in the note; a
per-connection cost is judged at whatever size was run, with the size beside it.

:func:`markdown` writes the summary as tables: targets, steps, headline figures.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ssegate_lab.bench.suite_steps import dig, number
from ssegate_lab.bench.validity import MET, MISSED, NOT_MEASURED, losses, median
from ssegate_lab.bench.verdict import Run, Verdict, decide

MIN_CONNECTIONS_FOR_COST = 10_000
"""Below this, fixed allocations (allocator arenas, the TLS session cache) weigh on the cost of
one connection: 2,000 idle TLS connections measured 33-35 KiB each, 10,000 and more 28-29 KiB."""
TIMES = "\u00d7"
"""The multiplication sign of ratios (written as an escape: it looks like an x)."""

Results = list[dict[str, Any]]
"""A step's results, one per run."""


@dataclass(frozen=True, slots=True)
class Target:
    text: str
    step: str
    judge: Callable[[Results], Verdict]


def _count(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def _kib(value: float) -> str:
    return f"{value / 1024:.1f} KiB ({value:,.0f} B)"


def _void(case: dict[str, Any]) -> str:
    """Why a case cannot judge: its load client was saturated."""
    if case.get("client_saturated"):
        share = number(case.get("client_cpu_share")) or 0.0
        return f"load client saturated ({share:.0%} of a core)"
    return ""


def _run_of(case: dict[str, Any], figures: dict[str, float]) -> Run:
    return Run(figures, tuple(losses(case)), _void(case))


IdleRun = tuple[dict[str, Any], dict[str, Any], dict[str, Any]]
"""(the step's result, its phase, one run of that phase)."""


def _idle_runs(results: Results, label: str) -> list[IdleRun]:
    """Every run of the ``label`` phase over the step's results."""
    found = []
    for result in results:
        side = result.get(label) or {}
        for each in side.get("each_run") or ([side] if side else []):
            found.append((result, side, each))
    return found


def _not_opened(side: dict[str, Any], each: dict[str, Any]) -> tuple[str, ...]:
    asked = number(each.get("asked", side.get("asked")))
    opened = number(each.get("opened"))
    if each.get("complete", True) or asked is None or opened is None:
        return ()
    return (f"{asked - opened:,.0f} of {asked:,.0f} connections not opened",)


def _idle_held(results: Results) -> Verdict:
    runs = []
    for result, side, each in _idle_runs(results, "plain"):
        asked = number(each.get("asked", side.get("asked")))
        held = number(each.get("held_by_gateway"))
        processes = number(side.get("gateway_processes")) or 1
        if held is None or asked is None:
            continue
        shown = f"{_count(held)} held by {processes:.0f} process(es)"
        if asked < 100_000:
            runs.append(Run(note=f"this run asked for {asked:,.0f}", shown=shown))
        elif processes > 1:
            notes = "; ".join(dig(result, "plan", "plain", "notes") or [])
            runs.append(Run(note=notes or "held by several processes", shown=shown))
        else:
            runs.append(Run({"held": held}, _not_opened(side, each)))
    if not runs:
        return Verdict("—", NOT_MEASURED, "no plain phase in the result")
    return decide(runs, lambda m: (f"{_count(m['held'])} held by 1 process", m["held"] >= 100_000))


def _idle_cost(label: str, limit: int) -> Callable[[Results], Verdict]:
    def judge(results: Results) -> Verdict:
        runs = []
        for _, side, each in _idle_runs(results, label):
            cost = number(each.get("bytes_per_connection"))
            held = number(each.get("held_by_gateway"))
            if cost is None:
                continue
            if held is None or held < MIN_CONNECTIONS_FOR_COST:
                why = f"at {_count(held)} connections: fewer than {MIN_CONNECTIONS_FOR_COST:,}"
                runs.append(Run(note=why + " do not measure a cost each", shown=_kib(cost)))
                continue
            short = _not_opened(side, each)
            void = f"{short[0]}: the cost is of fewer" if short else ""
            runs.append(Run({"cost": cost, "held": held}, void=void))
        if not runs:
            return Verdict("—", NOT_MEASURED, f"no {label} phase in the result")
        verdict = decide(runs, lambda m: (_kib(m["cost"]), m["cost"] <= limit))
        sizes = [run.figures["held"] for run in runs if run.figures]
        if not sizes:
            return verdict
        note = f"at {_count(min(sizes))} connections or more; {verdict.note}"
        return Verdict(verdict.measured, verdict.status, note)

    return judge


def _cases(result: dict[str, Any], **match: Any) -> list[dict[str, Any]]:
    return [
        case
        for case in result.get("cases", [])
        if all(case.get(key) == value for key, value in match.items())
    ]


def _million_case(result: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """The case of a run offering 1M ev/s to 1,000 subscribers (the most offered if several),
    or why there is none."""
    cases = [c for c in _cases(result, server="ssegate") if (c.get("clients") or 0) >= 1000]
    if not cases:
        return None, "no case with 1,000 subscribers"
    loaded = [c for c in cases if (number(c.get("offered_events_per_s")) or 0) >= 1_000_000]
    if not loaded:
        most = max(number(c.get("offered_events_per_s")) or 0 for c in cases)
        return None, f"{most:,.0f} ev/s offered at most: less than 1M"
    return max(loaded, key=lambda c: number(c.get("offered_events_per_s")) or 0), ""


def _million_per_s(results: Results) -> Verdict:
    runs = []
    for result in results:
        case, why = _million_case(result)
        if case is None:
            runs.append(Run(note=why))
            continue
        runs.append(_run_of(case, {"delivered": number(case.get("delivered_events_per_s")) or 0}))
    return decide(
        runs, lambda m: (f"{m['delivered']:,.0f} ev/s", m["delivered"] >= 1_000_000),
        "distinct events delivered to 1,000 subscribers",
    )  # fmt: skip


def _million_p99(results: Results) -> Verdict:
    runs = []
    for result in results:
        case, why = _million_case(result)
        p99 = number(dig(case, "latency_ms", "p99")) if case else None
        if case is None or p99 is None:
            runs.append(Run(note=why or "no latency in the result"))
            continue
        figures = {"p99": p99}
        sampled = number(dig(case, "latency_ms_sampled", "p99"))
        if sampled is not None:
            figures["sampled"] = sampled
        runs.append(_run_of(case, figures))

    def judge(medians: dict[str, float]) -> tuple[str, bool]:
        return f"{medians['p99']:,.1f} ms", medians["p99"] <= 50

    verdict = decide(runs, judge, "judged on the upper bound")
    estimate = median(run.figures["sampled"] for run in runs if "sampled" in run.figures)
    if estimate is None:
        return verdict
    note = f"{verdict.note} (sampled estimate {estimate:,.1f} ms)"
    return Verdict(verdict.measured, verdict.status, note)


def _light_p99(**match: Any) -> Callable[[Results], Verdict]:
    def judge(results: Results) -> Verdict:
        runs = []
        for result in results:
            cases = _cases(result, clients=100, rate=100, **match)
            p99 = number(dig(cases[0], "latency_ms", "p99")) if cases else None
            if p99 is None:
                why = "no latency in the result" if cases else "no case of 100 clients at 100 ev/s"
                runs.append(Run(note=why))
                continue
            delivered = number(cases[0].get("delivered_events_per_s")) or 0
            runs.append(_run_of(cases[0], {"p99": p99, "delivered": delivered}))
        return decide(
            runs,
            lambda m: (f"{m['p99']:,.1f} ms at {m['delivered']:,.0f} ev/s", m["p99"] <= 20),
        )

    return judge


def _no_mercure(result: dict[str, Any], otherwise: str) -> str:
    """Why a fan-out result has no ratio: Mercure's failed build, or ``otherwise``."""
    reason = dig(result, "mercure", "build")
    return f"Mercure: {reason}" if isinstance(reason, str) and reason != "ok" else otherwise


def _over_mercure_throughput(results: Results) -> Verdict:
    """ssegate's ladder against Mercure's (:func:`ssegate_lab.bench.ladder.compare`), per run."""
    runs = []
    for result in results:
        ratios = result.get("ratios") or {}
        ratio = ratios.get("throughput_at_p99_target")
        status = ratios.get("throughput_at_p99_target_status")
        note = ratios.get("throughput_at_p99_target_note") or ""
        if status is None and ratio is None:
            runs.append(Run(note=_no_mercure(result, "no ladder ratio")))
        elif status == NOT_MEASURED:
            runs.append(Run(note=note))
        else:
            runs.append(Run({"ratio": math.inf if ratio is None else float(ratio)}, note=note))

    def judge(medians: dict[str, float]) -> tuple[str, bool]:
        ratio = medians["ratio"]
        shown = "Mercure passed no rate" if math.isinf(ratio) else f"{ratio:.2f}{TIMES}"
        return shown, ratio >= 1.0

    return decide(runs, judge, "ssegate / Mercure, ladders resolved to 10 %")


def _over_mercure_memory(results: Results) -> Verdict:
    runs = []
    for result in results:
        ratio = number(dig(result, "ratios", "memory_per_idle_connection"))
        if ratio is None:
            runs.append(Run(note=_no_mercure(result, "no ratios.memory_per_idle_connection")))
            continue
        short = [
            f"{entry.get('server')}: {entry.get('failed')} idle connection(s) not opened"
            for entry in result.get("idle", [])
            if entry.get("failed")
        ]
        runs.append(Run({"ratio": ratio}, void="; ".join(short)))
    return decide(
        runs, lambda m: (f"{m['ratio']:.2f}{TIMES}", m["ratio"] <= 1.0), "ssegate / Mercure"
    )


def _over_kafkasse(results: Results) -> Verdict:
    runs = []
    for result in results:
        ratios = dig(result, "kafkasse", "ratio_ssegate_over_kafkasse") or []
        measured = [r for r in ratios if number(r.get("delivered_events_per_s")) is not None]
        at_1000 = [r for r in measured if r.get("clients") == 1000]
        if not at_1000:
            if not measured:
                runs.append(Run(note="KafkaSSE not run"))
                continue
            largest = max(measured, key=lambda r: r.get("clients") or 0)
            ratio, clients = largest["delivered_events_per_s"], largest.get("clients") or 0
            shown = f"{ratio:.1f}{TIMES} at {clients:,} clients"
            runs.append(Run(note="KafkaSSE was not run at 1,000 clients", shown=shown))
            continue
        ours = _cases(result, server="ssegate", clients=1000)
        theirs = _cases(result, server="kafkasse", clients=1000)
        void = "; ".join(
            f"{name}: {_void(cases[0])}"
            for name, cases in (("ssegate", ours), ("KafkaSSE", theirs))
            if cases and _void(cases[0])
        )
        lost = tuple(losses(ours[0])) if ours else ()
        runs.append(Run({"ratio": number(at_1000[0]["delivered_events_per_s"]) or 0.0}, lost, void))
    return decide(
        runs, lambda m: (f"{m['ratio']:.1f}{TIMES}", m["ratio"] >= 10), "delivered events/s"
    )


KEYED_STREAMS = 19_000
"""20,000 in the target; one process may hold 20,000 open files here, its own included."""


def _keyed(results: Results) -> Verdict:
    """20,000 key-filtered streams at 1,000 msg/s: complete, p99 ≤ 100 ms, CPU ≤ 50 %.

    Every repeat of the largest case is a run.
    """
    runs = []
    for result in results:
        cases = [
            case for case in result.get("cases", [])
            if case.get("gateway") == "ssegate" and (case.get("streams") or 0) >= KEYED_STREAMS
        ]  # fmt: skip
        if not cases:
            runs.append(Run(note=f"no case with {KEYED_STREAMS:,} streams"))
            continue
        largest = max(case["streams"] for case in cases)
        rate = number(result.get("rate")) or 0
        for case in (c for c in cases if c["streams"] == largest):
            p99 = number(dig(case, "latency_ms", "p99"))
            cpu = number(case.get("gateway_cpu_share"))
            if rate < 1000 or p99 is None or cpu is None:
                runs.append(Run(note=f"{rate:,.0f} msg/s: below 1,000 msg/s or no figures"))
                continue
            counted = case | {"missing": case.get("lost", 0)}
            runs.append(_run_of(counted, {"p99": p99, "cpu": cpu, "streams": case["streams"]}))

    def judge(medians: dict[str, float]) -> tuple[str, bool]:
        shown = f"p99 {medians['p99']:,.0f} ms, CPU {medians['cpu']:.0%} of a core"
        return shown, medians["p99"] <= 100 and medians["cpu"] <= 0.5

    return decide(runs, judge, "every run complete")


LIGHT = "p99 ≤ 20 ms at light load (100 clients, 100 events/s)"

TARGETS: tuple[Target, ...] = (
    Target("≥ 100,000 idle connections held by one gateway process", "idle", _idle_held),
    Target("RSS per idle plain connection ≤ 4 KiB", "idle", _idle_cost("plain", 4096)),
    Target("RSS per idle TLS connection ≤ 30 KiB", "idle", _idle_cost("tls", 30 * 1024)),
    Target(
        "≥ 1,000,000 events/s delivered at 1,000 subscribers", "kafka-throughput", _million_per_s
    ),
    Target("p99 ≤ 50 ms at that load", "kafka-throughput", _million_p99),
    Target(f"{LIGHT}, Kafka → SSE", "kafka", _light_p99(server="ssegate")),
    Target(f"{LIGHT}, SSE proxy over HTTP/1.1", "proxy", _light_p99(protocol="h1")),
    Target(f"≥ 1.0{TIMES} Mercure's throughput at equal p99", "fanout", _over_mercure_throughput),
    Target(f"≤ 1.0{TIMES} Mercure's memory per connection", "fanout", _over_mercure_memory),
    Target(f"≥ 10{TIMES} KafkaSSE's delivered events/s at 1,000 clients", "kafka", _over_kafkasse),
    Target(
        "20,000 key-filtered streams at 1,000 msg/s: none lost, p99 ≤ 100 ms, CPU ≤ 50 %",
        "keyed",
        _keyed,
    ),
)


def judge_targets(results: dict[str, Results], steps: dict[str, str]) -> list[dict[str, Any]]:
    """Every target against the results of the steps that ran (step name → each run's result).

    ``steps`` gives each step's status; a target whose step did not end ``ok`` is
    ``not measured`` with that status as the reason. The Kafka targets read the ``kafka``
    step when a profile has no ``kafka-throughput`` step.
    """
    verdicts = []
    for target in TARGETS:
        step = target.step
        if step not in steps and step == "kafka-throughput":
            step = "kafka"
        result = results.get(step)
        if not result:
            status = steps.get(step, "not in this profile")
            verdict = Verdict("—", NOT_MEASURED, f"step {step}: {status}")
        else:
            try:
                verdict = target.judge(result)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                verdict = Verdict("—", NOT_MEASURED, f"unreadable result: {exc!r}")
        verdicts.append(
            {
                "target": target.text,
                "step": step,
                "measured": verdict.measured,
                "status": verdict.status,
                "note": verdict.note,
            }
        )
    return verdicts


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.2f}"
    if isinstance(value, int | float):
        return f"{value:,.0f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown(summary: dict[str, Any]) -> str:
    """The summary as a page: targets, steps, then every step's headline figures."""
    machine = summary.get("machine", {})
    lines = [
        f"# ssegate bench all — profile {summary['profile']}, {summary['started_utc']}",
        "",
        f"{machine.get('cpus')} CPUs ({machine.get('cpu_model')}), Python"
        f" {machine.get('python')}, kernel {machine.get('kernel')}. The run took"
        f" {summary['seconds']:.0f} s of its {summary['bound_s']:.0f} s bound.",
        "",
        "## Targets",
        "",
        "| target | measured | | note | step |",
        "|---|---|---|---|---|",
    ]
    for verdict in summary["targets"]:
        status = verdict["status"]
        shown = f"**{status}**" if status in (MET, MISSED) else status
        lines.append(
            f"| {verdict['target']} | {_cell(verdict['measured'])} | {shown}"
            f" | {_cell(verdict['note'])} | {verdict['step']} |"
        )
    lines += ["", "## Steps", "", "| step | status | seconds | result |", "|---|---|---|---|"]
    for step in summary["steps"]:
        result = _cell(step.get("result_file") or step.get("reason"))
        seconds = f"{step.get('seconds') or 0:,.0f}"
        lines.append(f"| {step['name']} | {step['status']} | {seconds} | {result} |")
    plots = [step for step in summary["steps"] if step.get("plot")]
    if plots:
        lines += ["", "## Plots", ""]
        lines += [f"- {step['name']}: ![{step['name']}]({step['plot']})" for step in plots]
    lines += ["", "## Headline figures", "", "| step | figure | value |", "|---|---|---|"]
    for step in summary["steps"]:
        for name, value in (step.get("headlines") or {}).items():
            lines.append(f"| {step['name']} | {name} | {_cell(value)} |")
    return "\n".join(lines) + "\n"

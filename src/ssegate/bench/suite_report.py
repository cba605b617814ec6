"""The targets of ssegate's performance issue, judged against one ``bench all`` run, and its report.

Each :class:`Target` names the step whose result answers it and a judge that reads that
result and returns a :class:`Verdict`: what was measured, and ``met``, ``missed`` or
``not measured``. A figure measured at another size than the target's (a quick profile's
2,000 connections against a 100,000 target) is ``not measured``, with the size in the note;
a per-connection cost is judged at whatever size was run, with the size beside it.

:func:`markdown` writes the summary as tables: targets, steps, headline figures.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ssegate.bench.suite_steps import dig, number

MET = "met"
MISSED = "missed"
NOT_MEASURED = "not measured"
MIN_CONNECTIONS_FOR_COST = 10_000
"""Below this, fixed allocations (allocator arenas, the TLS session cache) weigh on the cost of
one connection: 2,000 idle TLS connections measured 33-35 KiB each, 10,000 and more 28-29 KiB."""
TIMES = "\u00d7"
"""The multiplication sign of ratios (written as an escape: it looks like an x)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    measured: str
    status: str
    note: str = ""


@dataclass(frozen=True, slots=True)
class Target:
    text: str
    step: str
    judge: Callable[[dict[str, Any]], Verdict]


def _count(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def _kib(value: float) -> str:
    return f"{value / 1024:.1f} KiB ({value:,.0f} B)"


def _status(ok: bool) -> str:
    return MET if ok else MISSED


def _idle_held(result: dict[str, Any]) -> Verdict:
    side = result.get("plain") or {}
    asked, held = number(side.get("asked")), number(side.get("held_by_gateway"))
    processes = number(side.get("gateway_processes")) or 1
    if held is None or asked is None:
        return Verdict("—", NOT_MEASURED, "no plain phase in the result")
    measured = f"{_count(held)} held by {processes:.0f} process(es)"
    if asked < 100_000:
        return Verdict(measured, NOT_MEASURED, f"this run asked for {asked:,.0f}")
    if held < 100_000:
        return Verdict(measured, MISSED, f"{asked:,.0f} asked")
    if processes > 1:
        notes = dig(result, "plan", "plain", "notes") or []
        return Verdict(measured, NOT_MEASURED, "; ".join(notes) or "held by several processes")
    return Verdict(measured, MET)


def _idle_cost(label: str, limit: int) -> Callable[[dict[str, Any]], Verdict]:
    def judge(result: dict[str, Any]) -> Verdict:
        cost = number(dig(result, label, "bytes_per_connection"))
        held = number(dig(result, label, "held_by_gateway"))
        if cost is None:
            return Verdict("—", NOT_MEASURED, f"no {label} phase in the result")
        runs = dig(result, label, "bytes_per_connection_runs") or [cost]
        note = f"at {_count(held)} connections; median of {len(runs)} run(s)"
        if held is None or held < MIN_CONNECTIONS_FOR_COST:
            why = f"{note}: fewer than {MIN_CONNECTIONS_FOR_COST:,} do not measure a cost each"
            return Verdict(_kib(cost), NOT_MEASURED, why)
        return Verdict(_kib(cost), _status(cost <= limit), note)

    return judge


def _cases(result: dict[str, Any], **match: Any) -> list[dict[str, Any]]:
    return [
        case
        for case in result.get("cases", [])
        if all(case.get(key) == value for key, value in match.items())
    ]


def _million_per_s(result: dict[str, Any]) -> Verdict:
    cases = [c for c in _cases(result, server="ssegate") if (c.get("clients") or 0) >= 1000]
    if not cases:
        return Verdict("—", NOT_MEASURED, "no case with 1,000 subscribers")
    best = max(cases, key=lambda c: number(c.get("delivered_events_per_s")) or 0)
    delivered = number(best.get("delivered_events_per_s")) or 0
    offered = number(best.get("offered_events_per_s")) or 0
    note = f"{best.get('clients'):,} subscribers, {offered:,.0f} ev/s offered"
    if offered < 1_000_000:
        return Verdict(f"{delivered:,.0f} ev/s", NOT_MEASURED, note + ": less than 1M offered")
    return Verdict(f"{delivered:,.0f} ev/s", _status(delivered >= 1_000_000), note)


def _million_p99(result: dict[str, Any]) -> Verdict:
    cases = [c for c in _cases(result, server="ssegate") if (c.get("clients") or 0) >= 1000]
    loaded = [c for c in cases if (number(c.get("offered_events_per_s")) or 0) >= 1_000_000]
    if not loaded:
        return Verdict("—", NOT_MEASURED, "no case offering 1M ev/s to 1,000 subscribers")
    case = loaded[0]
    p99 = number(dig(case, "latency_ms", "p99"))
    if p99 is None:
        return Verdict("—", NOT_MEASURED, "no latency in the result")
    delivered = number(case.get("delivered_events_per_s")) or 0
    note = f"at {delivered:,.0f} ev/s delivered; judged on the upper bound"
    sampled = number(dig(case, "latency_ms_sampled", "p99"))
    if sampled is not None:
        note += f" (sampled estimate {sampled:,.1f} ms)"
    return Verdict(f"{p99:,.1f} ms", _status(p99 <= 50), note)


def _light_p99(**match: Any) -> Callable[[dict[str, Any]], Verdict]:
    def judge(result: dict[str, Any]) -> Verdict:
        cases = _cases(result, clients=100, rate=100, **match)
        if not cases:
            return Verdict("—", NOT_MEASURED, "no case of 100 clients at 100 events/s")
        p99 = number(dig(cases[0], "latency_ms", "p99"))
        if p99 is None:
            return Verdict("—", NOT_MEASURED, "no latency in the result")
        delivered = number(cases[0].get("delivered_events_per_s")) or 0
        return Verdict(f"{p99:,.1f} ms", _status(p99 <= 20), f"{delivered:,.0f} ev/s delivered")

    return judge


def _over_mercure(name: str, better_above: bool) -> Callable[[dict[str, Any]], Verdict]:
    def judge(result: dict[str, Any]) -> Verdict:
        ratio = number(dig(result, "ratios", name))
        if ratio is None:
            reason = dig(result, "mercure", "build")
            why = f"Mercure: {reason}" if isinstance(reason, str) else f"no ratios.{name}"
            return Verdict("—", NOT_MEASURED, why)
        ok = ratio >= 1.0 if better_above else ratio <= 1.0
        return Verdict(f"{ratio:.2f}{TIMES}", _status(ok), "ssegate / Mercure")

    return judge


def _over_kafkasse(result: dict[str, Any]) -> Verdict:
    ratios = dig(result, "kafkasse", "ratio_ssegate_over_kafkasse") or []
    at_1000 = [r for r in ratios if r.get("clients") == 1000]
    if at_1000:
        ratio = number(at_1000[0].get("delivered_events_per_s"))
        if ratio is not None:
            return Verdict(f"{ratio:.1f}{TIMES}", _status(ratio >= 10), "delivered events/s")
    measured = [r for r in ratios if number(r.get("delivered_events_per_s")) is not None]
    if not measured:
        return Verdict("—", NOT_MEASURED, "KafkaSSE not run")
    largest = max(measured, key=lambda r: r.get("clients") or 0)
    ratio = largest["delivered_events_per_s"]
    shown = f"{ratio:.1f}{TIMES} at {largest.get('clients'):,} clients"
    return Verdict(shown, NOT_MEASURED, "KafkaSSE was not run at 1,000 clients")


KEYED_STREAMS = 19_000
"""20,000 in the target; one process may hold 20,000 open files here, its own included."""


def _keyed(result: dict[str, Any]) -> Verdict:
    """20,000 key-filtered streams at 1,000 msg/s: complete, p99 ≤ 100 ms, CPU ≤ 50 %."""
    rows = [
        row
        for row in result.get("summary", [])
        if row.get("gateway") == "ssegate" and (row.get("streams") or 0) >= KEYED_STREAMS
    ]
    if not rows:
        return Verdict("—", NOT_MEASURED, f"no case with {KEYED_STREAMS:,} streams")
    row = max(rows, key=lambda r: r["streams"])
    rate = number(result.get("rate")) or 0
    p99 = number(row.get("p99_ms_median"))
    cpu = number(row.get("gateway_cpu_share_median"))
    note = (
        f"{row['streams']:,} streams, {rate:,.0f} msg/s, median of {row.get('runs')} run(s);"
        f" lost {row.get('lost')}, duplicated {row.get('duplicates')}"
    )
    if rate < 1000 or p99 is None or cpu is None:
        return Verdict("—", NOT_MEASURED, note + ": below 1,000 msg/s or no figures")
    ok = bool(row.get("all_complete")) and p99 <= 100 and cpu <= 0.5
    return Verdict(f"p99 {p99:,.0f} ms, CPU {cpu:.0%} of a core", _status(ok), note)


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
    Target(
        f"≥ 1.0{TIMES} Mercure's throughput at equal p99",
        "fanout",
        _over_mercure("throughput_at_p99_target", better_above=True),
    ),
    Target(
        f"≤ 1.0{TIMES} Mercure's memory per connection",
        "fanout",
        _over_mercure("memory_per_idle_connection", better_above=False),
    ),
    Target(f"≥ 10{TIMES} KafkaSSE's delivered events/s at 1,000 clients", "kafka", _over_kafkasse),
    Target(
        "20,000 key-filtered streams at 1,000 msg/s: none lost, p99 ≤ 100 ms, CPU ≤ 50 %",
        "keyed",
        _keyed,
    ),
)


def judge_targets(
    results: dict[str, dict[str, Any]], steps: dict[str, str]
) -> list[dict[str, Any]]:
    """Every target against the results of the steps that ran (step name → result JSON).

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
        if result is None:
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

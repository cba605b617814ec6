"""The targets of ssegate's performance issue, judged against one ``bench all`` run, and its report.

Each :class:`Target` names the step whose results answer it and a judge that reads every run's
result and returns a :class:`~ssegate_lab.bench.verdict.Verdict`: what was measured, and ``met``,
``missed``, ``not measured`` or ``no verdict``. Every judge goes through
:func:`~ssegate_lab.bench.verdict.decide`: a run that lost, duplicated, misdelivered or skipped
an event (or failed to open or keep a stream) fails the target, with or without a figure; a run
whose load client was saturated, or that does not say, leaves it without a verdict; and the
figure judged is the median of at least three runs (a step's own runs, or the repeats a
scenario makes inside one run: ``idle --runs``, ``keyed --repeat``). A figure measured at
another size than the target states (a quick profile's 2,000 connections against a 100,000
target), or over a shorter run than the target's shortest (:data:`SECONDS`), is ``not
measured``, with the size in the note; a per-connection cost is judged at whatever size was
run, with the size beside it.

The judges of the idle, 1M events/s, Mercure memory and KafkaSSE targets are here; the others
are built from :mod:`ssegate_lab.bench.suite_judges`, :mod:`~ssegate_lab.bench.suite_disruption`
and :mod:`~ssegate_lab.bench.suite_pipeline`, one function per shape of target.
:func:`markdown` writes the summary as tables: targets, steps, headline figures.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ssegate_lab.bench import suite_judges as judges
from ssegate_lab.bench.floor_report import CPU_LIMIT, P99_LIMIT, floor_target
from ssegate_lab.bench.floor_report import SIZES as FLOOR_SIZES
from ssegate_lab.bench.suite_disruption import failover, stalled
from ssegate_lab.bench.suite_judges import (
    TIMES,
    KeyedSize,
    Load,
    Results,
    cases_of,
    count_text,
    no_mercure,
    run_of,
    short_of,
    void_of,
)
from ssegate_lab.bench.suite_pipeline import WHEN, pipeline_latency, pipeline_rate
from ssegate_lab.bench.suite_steps import dig, number
from ssegate_lab.bench.validity import MET, MISSED, NOT_MEASURED, losses, median
from ssegate_lab.bench.verdict import Run, Verdict, decide

MIN_CONNECTIONS_FOR_COST = 10_000
"""Below this, fixed allocations (allocator arenas, the TLS session cache) weigh on the cost of
one connection: 2,000 idle TLS connections measured 33-35 KiB each, 10,000 and more 28-29 KiB."""


@dataclass(frozen=True, slots=True)
class Target:
    text: str
    step: str
    judge: Callable[[Results], Verdict]


def _kib(value: float) -> str:
    return f"{value / 1024:.1f} KiB ({value:,.0f} B)"


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
        shown = f"{count_text(held)} held by {processes:.0f} process(es)"
        if asked < 100_000:
            runs.append(Run(note=f"this run asked for {asked:,.0f}", shown=shown))
        elif processes > 1:
            notes = "; ".join(dig(result, "plan", "plain", "notes") or [])
            runs.append(Run(note=notes or "held by several processes", shown=shown))
        else:
            runs.append(Run({"held": held}, _not_opened(side, each)))
    if not runs:
        return Verdict("—", NOT_MEASURED, "no plain phase in the result")
    return decide(
        runs, lambda m: (f"{count_text(m['held'])} held by 1 process", m["held"] >= 100_000)
    )


def _idle_cost(label: str, limit: int) -> Callable[[Results], Verdict]:
    def judge(results: Results) -> Verdict:
        runs = []
        for _, side, each in _idle_runs(results, label):
            cost = number(each.get("bytes_per_connection"))
            held = number(each.get("held_by_gateway"))
            if cost is None:
                continue
            if held is None or held < MIN_CONNECTIONS_FOR_COST:
                why = f"at {count_text(held)} connections: fewer than {MIN_CONNECTIONS_FOR_COST:,}"
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
        note = f"at {count_text(min(sizes))} connections or more; {verdict.note}"
        return Verdict(verdict.measured, verdict.status, note)

    return judge


SECONDS: dict[str, float] = {
    "million": 5.0,
    "kafka-light": 10.0,
    "proxy-light": 5.0,
    "kafka-fanout": 5.0,
    "proxy-10k": 5.0,
    "kafkasse": 5.0,
    "ladder-step": 3.0,
    "mercure-pairs": 4.0,
    "keyed": 300.0,
    "keyed-100k": 300.0,
    "keyed-soak": 1800.0,
    "stalled": 30.0,
    "failover": 5.0,
    "pipeline-latency": 30.0,
}
"""The shortest run each target takes, in seconds: the length of the run the
``docs/performance.md`` command of that target measures (``--duration``, a ladder rung's
``--ladder-duration``, ``stalled``'s baseline and after phases, ``failover``'s ``--hold`` after
a kill, the pipeline's ``--latency-seconds``). A shorter run shows its figure and judges
nothing. The idle and memory targets measure a state, not a span, and take none."""


def _million_case(result: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """The case of a run offering 1M ev/s to 1,000 subscribers (the most offered if several),
    or why there is none."""
    cases = [c for c in cases_of(result, server="ssegate") if (c.get("clients") or 0) >= 1000]
    if not cases:
        return None, "no case with 1,000 subscribers"
    loaded = [c for c in cases if (number(c.get("offered_events_per_s")) or 0) >= 1_000_000]
    if not loaded:
        most = max(number(c.get("offered_events_per_s")) or 0 for c in cases)
        return None, f"{most:,.0f} ev/s offered at most: less than 1M"
    case = max(loaded, key=lambda c: number(c.get("offered_events_per_s")) or 0)
    have, want = short_of(number(result.get("duration_s")), SECONDS["million"], "of load")
    return (None, f"at {have}: the target's is {want}") if have else (case, "")


def _million_per_s(results: Results) -> Verdict:
    runs = []
    for result in results:
        case, why = _million_case(result)
        if case is None:
            runs.append(Run(note=why))
            continue
        runs.append(run_of(case, {"delivered": number(case.get("delivered_events_per_s")) or 0}))
    return decide(
        runs, lambda m: (f"{m['delivered']:,.0f} ev/s", m["delivered"] >= 1_000_000),
        "distinct events delivered to 1,000 subscribers",
    )  # fmt: skip


def _million_p99(results: Results) -> Verdict:
    runs = []
    for result in results:
        case, why = _million_case(result)
        if case is None:
            runs.append(Run(note=why))
            continue
        p99 = number(dig(case, "latency_ms", "p99"))
        if p99 is None:
            runs.append(Run(note="no latency in the result", losses=tuple(losses(case)),
                            void=void_of(case)))  # fmt: skip
            continue
        figures = {"p99": p99}
        sampled = number(dig(case, "latency_ms_sampled", "p99"))
        if sampled is not None:
            figures["sampled"] = sampled
        runs.append(run_of(case, figures))

    def judge(medians: dict[str, float]) -> tuple[str, bool]:
        return f"{medians['p99']:,.1f} ms", medians["p99"] <= 50

    verdict = decide(runs, judge, "judged on the upper bound")
    estimate = median(run.figures["sampled"] for run in runs if "sampled" in run.figures)
    if estimate is None:
        return verdict
    note = f"{verdict.note} (sampled estimate {estimate:,.1f} ms)"
    return Verdict(verdict.measured, verdict.status, note)


def _over_mercure_memory(results: Results) -> Verdict:
    runs = []
    for result in results:
        ratio = number(dig(result, "ratios", "memory_per_idle_connection"))
        if ratio is None:
            runs.append(Run(note=no_mercure(result, "no ratios.memory_per_idle_connection")))
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
        ratio = number(at_1000[0]["delivered_events_per_s"]) or 0.0
        have, want = short_of(number(result.get("duration_s")), SECONDS["kafkasse"], "of load")
        if have:
            runs.append(judges.at_size(f"{ratio:.1f}{TIMES}", have, want))
            continue
        ours = cases_of(result, server="ssegate", clients=1000)
        theirs = cases_of(result, server="kafkasse", clients=1000)
        void = "; ".join(
            f"{name}: {void_of(cases[0])}"
            for name, cases in (("ssegate", ours), ("KafkaSSE", theirs))
            if cases and void_of(cases[0])
        )
        lost = tuple(losses(ours[0])) if ours else ()
        runs.append(Run({"ratio": ratio}, lost, void))
    return decide(
        runs, lambda m: (f"{m['ratio']:.1f}{TIMES}", m["ratio"] >= 10), "delivered events/s"
    )


KEYED = KeyedSize(20_000, 1000, SECONDS["keyed"], keys=50_000)
"""The 20,000 key-filtered streams of the target, as it states them: over HTTP/1.1 one process
may hold 20,000 open files here, its own included, so 20,000 streams are held over h2c
(``--h2-streams 250``), as ``docs/performance.md`` measures them."""
KEYED_100K = KeyedSize(100_000, 5000, SECONDS["keyed-100k"], keys=200_000)
SOAK = KeyedSize(19_000, 1160, SECONDS["keyed-soak"])
"""The 30-minute compressed day: 19,000 streams (HTTP/1.1, one process), as stated."""
MERCURE_TRANSPORTS = tuple((t, judges.TRANSPORT_WORDS[t]) for t in ("h1", "tls-h2"))
LADDER_STEPS = {"h1": "fanout", "tls-h2": "fanout-tls-h2"}
"""The step whose p99 ladder climbs over each transport, and whose pairs run over it."""
KAFKA = (("server", "ssegate"),)
STALLED = (
    ("p99_ratio", 2.0, f"live p99 ≤ 2{TIMES} the baseline"),
    ("late", 0, "every one ended within the bound"),
    ("rss_ratio", 1.10, f"gateway RSS after ≤ 1.10{TIMES} the baseline"),
    ("lost", 0, "the live readers lose nothing, none twice"),
)
"""The stalled clients' targets: (figure, limit, words)."""

TARGETS: tuple[Target, ...] = (
    Target("≥ 100,000 idle connections held by one gateway process", "idle", _idle_held),
    Target("RSS per idle plain connection ≤ 4 KiB", "idle", _idle_cost("plain", 4096)),
    Target("RSS per idle TLS connection ≤ 30 KiB", "idle", _idle_cost("tls", 30 * 1024)),
    Target(
        "≥ 1,000,000 events/s delivered at 1,000 subscribers", "kafka-throughput", _million_per_s
    ),
    Target("p99 ≤ 50 ms at that load", "kafka-throughput", _million_p99),
    Target(
        "p99 ≤ 10 ms at light load (100 clients, 100 events/s), Kafka → SSE",
        "kafka-light",
        judges.case_figure(
            Load(100, rate=100, fields=KAFKA), "p99", 10, seconds=SECONDS["kafka-light"]
        ),
    ),
    *(
        Target(
            f"SSE fan-out over {judges.TRANSPORT_WORDS[transport]}, {clients:,} subscribers"
            f" {TIMES} {rate:g} ev/s: CPU per delivery ≤ {CPU_LIMIT:g}{TIMES} and p99 ≤"
            f" {P99_LIMIT:g}{TIMES} the C floor's",
            "floor",
            floor_target(transport, clients, rate),
        )
        for transport in ("h1", "tls-h1")
        for clients, rate in FLOOR_SIZES
    ),
    Target(
        "p99 ≤ 20 ms at light load (100 clients, 100 events/s), SSE proxy over HTTP/1.1",
        "proxy",
        judges.case_figure(
            Load(100, rate=100, fields=(("protocol", "h1"),)),
            "p99",
            20,
            seconds=SECONDS["proxy-light"],
        ),
    ),
    Target(
        f"≤ 3.3 µs of gateway CPU per delivery at 10,000 subscribers {TIMES} 30 msg/s, one"
        " event per write, Kafka → SSE",
        "kafka-fanout",
        judges.case_figure(
            Load(10_000, rate=30, fields=KAFKA),
            "cpu_per_delivery",
            3.3,
            seconds=SECONDS["kafka-fanout"],
        ),
    ),
    Target(
        f"p99 ≤ 50 ms at 10,000 subscribers {TIMES} 30 msg/s, Kafka → SSE",
        "kafka-fanout",
        judges.case_figure(
            Load(10_000, rate=30, fields=KAFKA), "p99", 50, seconds=SECONDS["kafka-fanout"]
        ),
    ),
    Target(
        "p99 ≤ 25 ms at 10,000 clients and 20,000 deliveries/s, SSE proxy over HTTP/1.1",
        "proxy-10k",
        judges.case_figure(
            Load(10_000, deliveries=20_000, fields=(("protocol", "h1"),)),
            "p99",
            25,
            seconds=SECONDS["proxy-10k"],
        ),
    ),
    Target(
        f"≥ 1.0{TIMES} Mercure's throughput at equal p99",
        "fanout",
        judges.over_mercure("throughput", "h1", 1.0, seconds=SECONDS["ladder-step"]),
    ),
    *(
        Target(
            f"≥ 1.5{TIMES} Mercure's throughput at equal p99, 2 workers, {words}",
            LADDER_STEPS[transport],
            judges.over_mercure(
                "throughput", transport, 1.5, seconds=SECONDS["ladder-step"], workers=2
            ),
        )
        for transport, words in MERCURE_TRANSPORTS
    ),
    *(
        Target(
            f"≤ 0.7{TIMES} Mercure's p99 at equal load, 2 workers, {words}",
            LADDER_STEPS[transport],
            judges.over_mercure("p99", transport, 0.7, seconds=SECONDS["mercure-pairs"], workers=2),
        )
        for transport, words in MERCURE_TRANSPORTS
    ),
    Target(f"≤ 1.0{TIMES} Mercure's memory per connection", "fanout", _over_mercure_memory),
    Target(f"≥ 10{TIMES} KafkaSSE's delivered events/s at 1,000 clients", "kafka", _over_kafkasse),
    Target(
        "20,000 key-filtered streams, 50,000 keys, at 1,000 msg/s: none lost, p99 ≤ 100 ms,"
        " CPU ≤ 50 %",
        "keyed",
        judges.keyed(KEYED, 100, cpu_share=0.5),
    ),
    Target(
        "100,000 key-filtered streams across workers at 5,000 msg/s for 5 min: none lost,"
        " p99 ≤ 250 ms",
        "keyed-100k",
        judges.keyed(KEYED_100K, 250),
    ),
    Target(
        "19,000 key-filtered streams at 1,160 msg/s for 30 min: no stream stops, RSS ≤ 10 %"
        " growth after the first 5 min",
        "keyed-soak",
        judges.soak(SOAK, 300, 0.10),
    ),
    *(
        Target(
            f"1,000 stalled clients: {words}",
            "stalled",
            stalled(figure, limit, seconds=SECONDS["stalled"]),
        )
        for figure, limit, words in STALLED
    ),
    Target(
        "Kafka leaders killed under 1,000 streams: 0 lost, 0 duplicated, 0 out of order",
        "failover",
        failover(seconds=SECONDS["failover"], clients=1000),
    ),
    *(
        Target(
            f"pipeline, {case}, {WHEN[when]}: ≥ {limit:,} records/s",
            "pipeline",
            pipeline_rate(case, limit, when),
        )
        for case, limit in (("stateless", 100_000), ("windowed", 50_000))
        for when in WHEN
    ),
    Target(
        "pipeline: produce → SSE client p99 ≤ 1 s at the default trigger",
        "pipeline-latency",
        pipeline_latency(1000, seconds=SECONDS["pipeline-latency"]),
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


def targets_table(verdicts: list[dict[str, Any]]) -> list[str]:
    """The targets' verdicts as a Markdown table, one line each (``docs/performance.md`` keeps
    the latest one as written here)."""
    lines = ["| target | measured | | note | step |", "|---|---|---|---|---|"]
    for verdict in verdicts:
        status = verdict["status"]
        shown = f"**{status}**" if status in (MET, MISSED) else status
        lines.append(
            f"| {verdict['target']} | {_cell(verdict['measured'])} | {shown}"
            f" | {_cell(verdict['note'])} | {verdict['step']} |"
        )
    return lines


def markdown(summary: dict[str, Any]) -> str:
    """The summary as a page: targets, steps, then every step's headline figures."""
    machine = summary.get("machine", {})
    provenance = summary.get("provenance", {})
    commit = provenance.get("commit") or "an unknown commit"
    clean = provenance.get("tree_clean")
    tree = "state unknown" if clean is None else "clean" if clean else "with changes"
    memory = number(machine.get("memory_bytes"))
    load = machine.get("load_average_at_start")
    lines = [
        f"# ssegate bench all — profile {summary['profile']}, {summary['started_utc']}",
        "",
        f"Commit {commit} (tree {tree}). {machine.get('cpus')} CPUs"
        f" ({machine.get('cpu_model')}), {'—' if memory is None else f'{memory / 2**30:.1f}'}"
        f" GiB, Python {machine.get('python')}, kernel {machine.get('kernel')}, load average"
        f" {'—' if not load else ' '.join(f'{v:g}' for v in load)} at the start. The run took"
        f" {summary['seconds']:.0f} s of its {summary['bound_s']:.0f} s bound.",
        "",
        f"`{provenance.get('command_line', '—')}`",
        "",
        "## Targets",
        "",
        *targets_table(summary["targets"]),
    ]
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

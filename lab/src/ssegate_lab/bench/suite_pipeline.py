"""Judges of ``bench all``'s pipeline targets, and the records the pipeline's sink owes.

The ``pipeline`` scenario produces readings of a fixed shape (:mod:`ssegate_lab.bench.pipeline`:
reading ``i`` is of device ``i mod 100``, at ``15 + (i mod 250) / 10`` °C, 10,000 readings to
an event-time second), so what each job must write to its sink topic is known before it runs
(:func:`sink_owed`):

- ``stateless`` keeps the readings over 16 °C: 239 of every 250;
- ``windowed`` writes one row per device for each 1 s window its watermark (1 s behind the
  newest reading) has closed: every event-time second but the last two.

A run whose sink holds another count did not write every record once, so its records/s is not
the pipeline's throughput: it fails the target as a loss, and a sink that holds nothing is named
as such. A run whose result does not give the sink's count makes no verdict. A session's first
run of a job and its warm runs are judged apart (:data:`WHEN`). The latency case
owes its sink the same share of the readings it produced, and its SSE client every record the
sink held.
"""

from __future__ import annotations

from typing import Any

from ssegate_lab.bench.suite_judges import Judge, Results, at_size, short_of
from ssegate_lab.bench.suite_steps import dig, number
from ssegate_lab.bench.validity import NOT_MEASURED, losses
from ssegate_lab.bench.verdict import Run, Verdict, decide

PIPELINE_RECORDS = 1_000_000
"""The records a throughput is measured over in ``docs/performance.md``; fewer weigh the
query's start-up more."""
TEMPERATURE_CYCLE = 250
"""Readings over which the produced temperatures repeat (15.0 to 39.9 °C)."""
COLD_PER_CYCLE = 11
"""Readings of a cycle at most 16 °C (15.0 to 16.0), which the stateless job's filter drops."""
DEVICES = 100
READINGS_PER_EVENT_SECOND = 10_000
WATERMARK_HELD_SECONDS = 2
"""Event-time seconds at the end whose windows the windowed job's watermark has not closed."""


def sink_owed(case: str, readings: int) -> int | None:
    """The records the ``case`` job (``stateless``, ``windowed``) owes its sink after
    ``readings`` produced readings; None for a case it does not know."""
    if case == "stateless":
        cycles, rest = divmod(readings, TEMPERATURE_CYCLE)
        kept = TEMPERATURE_CYCLE - COLD_PER_CYCLE
        return cycles * kept + max(0, rest - COLD_PER_CYCLE)
    if case == "windowed":
        if readings <= 0:
            return 0
        seconds = (readings - 1) // READINGS_PER_EVENT_SECOND + 1
        return max(0, seconds - WATERMARK_HELD_SECONDS) * DEVICES
    return None


def sink_check(held: object, owed: int | None) -> tuple[tuple[str, ...], str]:
    """(losses, why no verdict) of a sink that holds ``held`` records of ``owed``."""
    count = number(held)
    if count is None:
        return (), "the result does not give the sink's count: whether every record was written"\
            " is unknown"  # fmt: skip
    if owed is None:
        return (), "no count of what the sink owes"
    if count == owed:
        return (), ""
    if count == 0:
        return (f"the sink holds no record ({owed:,} owed)",), ""
    if count < owed:
        return (f"{owed - count:,} of {owed:,} records not in the sink",), ""
    return (f"{count - owed:,} more records in the sink than the {owed:,} owed",), ""


WHEN = {"first": "a session's first run", "warm": "warm (the runs after a session's first)"}
"""Which of a session's runs of a job a throughput target reads: a user's first run pays for the
session's and the job's start-up; the later ones run on a warm session."""


def pipeline_rate(
    case: str, limit: float, when: str = "warm", records: int = PIPELINE_RECORDS
) -> Judge:
    """Records/s of the pipeline's ``case`` (``stateless``, ``windowed``) over at least
    ``records`` records: at least ``limit``, every run's sink holding what it owes. ``when``
    (:data:`WHEN`) picks each session's first run of the job, or the runs after it; each is a
    run, with or without its figure."""
    if when not in WHEN:
        raise ValueError(f"when is one of {', '.join(WHEN)}")

    def judge(results: Results) -> Verdict:
        runs = []
        for result in results:
            entry = result.get(case)
            if not isinstance(entry, dict):
                runs.append(Run(note=f"no {case} case in the result"))
                continue
            asked = number(result.get("records")) or 0
            each_run = entry.get("runs", [])
            picked = each_run[:1] if when == "first" else each_run[1:]
            if not picked:
                runs.append(Run(note=f"no {WHEN[when]} of {case} in the result"))
            for each in picked:
                rate = number(each.get("records_per_s"))
                text = "—" if rate is None else f"{rate:,.0f} records/s"
                if asked < records:
                    runs.append(at_size(text, f"{asked:,.0f} records", f"{records:,}"))
                    continue
                lost, void = sink_check(each.get("sink_records"), sink_owed(case, int(asked)))
                if rate is None:
                    runs.append(Run(note="no records/s in the result", losses=lost, void=void))
                else:
                    runs.append(Run({"rate": rate}, lost, void))
        if not runs:
            return Verdict("—", NOT_MEASURED, f"no run of {case} in the result")
        return decide(
            runs,
            lambda m: (f"{m['rate']:,.0f} records/s", m["rate"] >= limit),
            f"{WHEN[when]} of each session; every sink holds what it owes",
        )

    return judge


def pipeline_latency(limit_ms: float, *, seconds: float) -> Judge:
    """p99 of the stateless job at the default trigger over a case of at least ``seconds``, at
    most ``limit_ms``: produce → SSE client (through the sink topic and a gateway), the produce
    → sink p99 shown beside it. A result from before the SSE client was measured is judged on
    its produce → sink p99, and says so. A record that did not reach the sink, or reached it and
    not the client, or came to it twice, is a loss."""

    def judge(results: Results) -> Verdict:
        from ssegate.pipeline.config import DEFAULT_TRIGGER
        from ssegate_lab.bench.pipeline import trigger_key

        key = trigger_key(DEFAULT_TRIGGER)
        entries = [dig(result, "latency", key) for result in results]
        runs = [_pipeline_latency_run(entry, key, seconds) for entry in entries]
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


def _latency_sink(entry: dict[str, Any]) -> tuple[tuple[str, ...], str]:
    """What the latency case's sink lacked of the stateless share of the readings produced."""
    rate, lasted = number(entry.get("rate")), number(entry.get("seconds"))
    owed = sink_owed("stateless", int(rate * lasted)) if rate and lasted else None
    return sink_check(entry.get("received"), owed)


def _pipeline_latency_run(entry: object, key: str, seconds: float) -> Run:
    """One run of the latency case at ``key``: its p99 to the SSE client (to the sink without
    one), the sink's beside it, and what the sink and the client lacked."""
    if not isinstance(entry, dict):
        return Run(note=f"no latency case at the default trigger ({key})")
    if entry.get("supported") is False:
        return Run(note=f"{key}: {entry.get('reason')}")
    sink_p99 = number(entry.get("p99_ms"))
    sse = entry.get("sse")
    p99 = number(sse.get("p99_ms")) if isinstance(sse, dict) else sink_p99
    have, want = short_of(number(entry.get("seconds")), seconds, "of producing")
    if have:
        return at_size("—" if p99 is None else f"{p99:,.0f} ms", have, want)
    lost, void = _latency_sink(entry)
    if isinstance(sse, dict):
        lost += tuple(losses(sse))
    if p99 is None:
        where = "the SSE client" if isinstance(sse, dict) else "the sink"
        return Run(note=f"{key}: nothing reached {where}", losses=lost, void=void)
    figures = {"p99": p99}
    if isinstance(sse, dict) and sink_p99 is not None:
        figures["sink_p99"] = sink_p99
    return Run(figures, lost, void)

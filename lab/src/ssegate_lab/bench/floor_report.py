"""ssegate ÷ the reference server's floor (pure): CPU per delivery and p99, pair by pair, judged.

The ``floor`` scenario (:mod:`ssegate_lab.bench.floor`) runs ssegate and the reference fan-out
server (``sse_floor.c``) one after the other at each (transport, clients, rate), with the same
publisher and load clients. Each case is a row with the server's CPU seconds and the distinct
events its streams read; this module turns them into:

- :func:`cpu_us_per_delivery`: the server's CPU microseconds per event delivered to a stream;
- :func:`pairs`: each ssegate row with the floor's row of the same transport, size, rate and
  run, and the ratios ssegate ÷ floor of CPU per delivery and of p99;
- :func:`judge`: per (transport, clients, rate), the target "CPU per delivery at most
  :data:`CPU_LIMIT` times the floor's and p99 at most :data:`P99_LIMIT` times its", through
  :func:`~ssegate_lab.bench.verdict.decide` on every run's ratios. A run in which ssegate's
  streams lost, duplicated or skipped an event fails the target, as every target's does; one in
  which the floor's did, or whose load client was saturated (or does not say), gives no
  verdict: a ratio against a server that did not deliver everything compares nothing. The
  verdict takes the median of at least
  :data:`~ssegate_lab.bench.validity.MIN_RUNS` runs;
- :func:`floor_target`: the same target at one of the sizes it is stated at (:data:`SIZES`)
  as ``bench all`` judges it, over every run of its ``floor`` step; a run shorter than the
  target's (:data:`SECONDS`) shows its ratios and judges nothing.
"""

from __future__ import annotations

from typing import Any

from ssegate_lab.bench.suite_judges import TIMES, Judge, Results, at_size, short_of
from ssegate_lab.bench.suite_steps import number
from ssegate_lab.bench.validity import NOT_MEASURED, losses
from ssegate_lab.bench.verdict import Run, Verdict, decide

CPU_LIMIT = 1.15
"""ssegate's CPU per delivery may be at most this many times the floor's."""
P99_LIMIT = 1.5
"""ssegate's p99 may be at most this many times the floor's."""
SIZES = ((100, 200.0), (1000, 20.0), (10_000, 2.0))
"""The target's sizes: subscribers, and the events/s each reads (20,000 deliveries/s at each)."""
SECONDS = 5.0
"""The shortest publication a pair of the target takes: ``docs/performance.md``'s command."""
OURS = "ssegate"
FLOOR = "floor"


def cpu_us_per_delivery(cpu_s: float, deliveries: int) -> float | None:
    """Server CPU microseconds per delivered event; None when nothing was delivered."""
    return round(cpu_s * 1e6 / deliveries, 3) if deliveries > 0 else None


def ratio(ours: float | None, floor: float | None) -> float | None:
    """``ours / floor`` to 3 places; None when either is missing or the floor is 0."""
    return round(ours / floor, 3) if ours is not None and floor else None


def _key(row: dict[str, Any]) -> tuple[str, int, float]:
    return row["transport"], row["clients"], row["rate"]


def _void(row: dict[str, Any]) -> str:
    """Why ``row``'s figures cannot stand beside another server's; empty when they can. What
    ssegate's streams lost is not here: it fails the pair (``lost``)."""
    lost = losses(row) if row["server"] != OURS else []
    if lost:
        return f"{row['server']} {', '.join(lost)}"
    saturated = row.get("client_saturated")
    if saturated is None:
        return f"{row['server']}'s case does not say whether its load client was saturated"
    if saturated:
        return f"{row['server']}'s load client saturated ({row['client_cpu_share']:.0%} of a core)"
    return ""


def pairs(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every ssegate row beside the floor row of the same transport, size, rate and run."""
    floors = {(*_key(row), row["run"]): row for row in cases if row["server"] == FLOOR}
    found = []
    for ours in cases:
        floor = floors.get((*_key(ours), ours["run"]))
        if ours["server"] != OURS or floor is None:
            continue
        void = "; ".join(reason for reason in (_void(ours), _void(floor)) if reason)
        found.append(
            {
                "transport": ours["transport"],
                "clients": ours["clients"],
                "rate": ours["rate"],
                "run": ours["run"],
                "cpu_us_per_delivery": {
                    OURS: ours["cpu_us_per_delivery"],
                    FLOOR: floor["cpu_us_per_delivery"],
                    "ratio": ratio(ours["cpu_us_per_delivery"], floor["cpu_us_per_delivery"]),
                },
                "p99_ms": {
                    OURS: ours["latency_ms"]["p99"],
                    FLOOR: floor["latency_ms"]["p99"],
                    "ratio": ratio(ours["latency_ms"]["p99"], floor["latency_ms"]["p99"]),
                },
                "lost": losses(ours),
                "void": void,
            }
        )
    return found


def _run(pair: dict[str, Any]) -> Run:
    lost = tuple(pair.get("lost") or ())
    if pair["void"]:
        return Run(losses=lost, void=pair["void"])
    cpu, p99 = pair["cpu_us_per_delivery"]["ratio"], pair["p99_ms"]["ratio"]
    if cpu is None or p99 is None:
        why = "a server has no CPU per delivery or no p99 to divide by"
        return Run(losses=lost, note=why) if lost else Run(void=why)
    return Run({"cpu": cpu, "p99": p99}, lost)


def _shown(medians: dict[str, float]) -> tuple[str, bool]:
    cpu, p99 = medians["cpu"], medians["p99"]
    text = f"CPU per delivery {cpu:.2f}{TIMES} the floor's, p99 {p99:.2f}{TIMES} the floor's"
    return text, cpu <= CPU_LIMIT and p99 <= P99_LIMIT


def floor_target(transport: str, clients: int, rate: float, *, seconds: float = SECONDS) -> Judge:
    """The target at ``clients`` subscribers reading ``rate`` events/s over ``transport``
    (``h1``, ``tls-h1``): every run's pair of that size, publishing for at least ``seconds``."""

    def judge(results: Results) -> Verdict:
        runs = []
        for result in results:
            found = [
                pair
                for pair in result.get("pairs") or []
                if (pair.get("transport"), pair.get("clients"), pair.get("rate"))
                == (transport, clients, rate)
            ]
            if not found:
                why = f"no {transport} pair of {clients:,} {TIMES} {rate:g} ev/s"
                runs.append(Run(note=why))
                continue
            have, want = short_of(number(result.get("duration_s")), seconds, "of publishing")
            if not have:
                runs += [_run(pair) for pair in found]
                continue
            for pair in found:
                cpu, p99 = pair["cpu_us_per_delivery"]["ratio"], pair["p99_ms"]["ratio"]
                shown = f"CPU {cpu}{TIMES}, p99 {p99}{TIMES} the floor's"
                runs.append(at_size(shown, have, want))
        if not runs:
            return Verdict("—", NOT_MEASURED, "no floor pairs in the result")
        return decide(runs, _shown, "ssegate ÷ the floor, pair by pair in one sitting")

    return judge


def judge(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One verdict per (transport, clients, rate) over the runs of :func:`pairs`."""
    grouped: dict[tuple[str, int, float], list[dict[str, Any]]] = {}
    for pair in found:
        grouped.setdefault(_key(pair), []).append(pair)
    verdicts = []
    for (transport, clients, rate), runs in grouped.items():
        target = (
            f"CPU per delivery ≤ {CPU_LIMIT:g}{TIMES} the floor's and p99 ≤ {P99_LIMIT:g}{TIMES}"
            " its"
        )
        verdict: Verdict = decide([_run(pair) for pair in runs], _shown)
        verdicts.append(
            {
                "transport": transport,
                "clients": clients,
                "rate": rate,
                "target": target,
                "measured": verdict.measured,
                "status": verdict.status,
                "note": verdict.note,
            }
        )
    return verdicts


def table(found: list[dict[str, Any]], verdicts: list[dict[str, Any]]) -> str:
    """The pairs and verdicts as plain text, one line each."""
    lines = [
        "transport clients rate run | CPU µs/delivery ssegate floor ratio | p99 ms ssegate"
        " floor ratio | void"
    ]
    for pair in found:
        cpu, p99 = pair["cpu_us_per_delivery"], pair["p99_ms"]
        lines.append(
            f"{pair['transport']} {pair['clients']} {pair['rate']:g} {pair['run']} |"
            f" {cpu[OURS]} {cpu[FLOOR]} {cpu['ratio']} | {p99[OURS]} {p99[FLOOR]} {p99['ratio']}"
            f" | {pair['void'] or '-'}"
        )
    for verdict in verdicts:
        lines.append(
            f"{verdict['transport']} {verdict['clients']} {verdict['rate']:g}: {verdict['status']}"
            f" ({verdict['measured']}; {verdict['note']})"
        )
    return "\n".join(lines)

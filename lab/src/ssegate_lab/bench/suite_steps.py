"""The steps of ``ssegate bench all``: which scenario runs with which arguments, and for how long.

A :class:`Step` is one scenario run: its name in the summary, the scenario's argv, a timeout,
whether it may draw a plot, and how to pull its headline figures out of the JSON it writes.
A profile is a tuple of steps; adding a scenario to the suite is one entry per profile.

- ``quick``: every scenario at a small size, each judging one three times; about 30 minutes.
- ``full``: the sizes of ``docs/performance.md`` plus 100,000 idle connections, each judging
  one three times (the 30-minute soak too); at most eight hours.
- ``tiny`` (for tests): the smallest sizes that still measure something, every step once (so
  it judges nothing).

The headline functions read a result as the scenario wrote it and return plain figures;
a figure the result does not carry is ``None``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Figures = dict[str, float | int | None]


@dataclass(frozen=True, slots=True)
class Step:
    name: str
    """Unique in a profile; also names the step's files."""
    scenario: str
    """The ``ssegate bench`` scenario it runs."""
    args: tuple[str, ...]
    timeout: float
    """Seconds before the step's process group is stopped and the step recorded ``timed_out``."""
    headlines: Callable[[dict[str, Any]], Figures]
    plot: bool = False
    """Ask for a PNG when the scenario has a ``--plot`` option."""
    runs: int = 1
    """Times the scenario runs, each in its own process (a verdict takes the median of 3)."""


def dig(data: Any, *path: str | int) -> Any:
    """``data[path[0]][path[1]]...``, or ``None`` where the path leaves the data."""
    for key in path:
        if isinstance(key, int) and isinstance(data, list) and -len(data) <= key < len(data):
            data = data[key]
        elif isinstance(key, str) and isinstance(data, dict):
            data = data.get(key)
        else:
            return None
    return data


def number(value: Any) -> float | int | None:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _label(value: Any) -> str:
    """A count or rate as it reads in a figure's name: ``100``, not ``100.0``."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def static_figures(result: dict[str, Any]) -> Figures:
    labels = ("http1_plain", "h2c", "h2_tls")
    return {f"{label}_rps": number(result.get(f"{label}_rps")) for label in labels}


def idle_figures(result: dict[str, Any]) -> Figures:
    figures: Figures = {}
    for label in ("plain", "tls"):
        for field in ("opened", "held_by_gateway", "bytes_per_connection", "open_seconds"):
            figures[f"{label}_{field}"] = number(dig(result, label, field))
        figures[f"{label}_gateway_processes"] = number(dig(result, label, "gateway_processes"))
    return figures


def proxy_figures(result: dict[str, Any]) -> Figures:
    figures: Figures = {}
    for case in result.get("cases", []):
        key = f"{case.get('protocol')}_{_label(case.get('clients'))}x{_label(case.get('rate'))}"
        figures[f"{key}_delivered_events_per_s"] = number(case.get("delivered_events_per_s"))
        figures[f"{key}_p99_ms"] = number(dig(case, "latency_ms", "p99"))
    return figures


def proxy_idle_figures(result: dict[str, Any]) -> Figures:
    return {
        "gateway_bytes_per_client": number(result.get("gateway_bytes_per_client")),
        "opened": number(result.get("opened")),
    }


def jwt_figures(result: dict[str, Any]) -> Figures:
    figures: Figures = {
        "rss_bytes_per_authorized_stream": number(result.get("rss_bytes_per_authorized_stream"))
    }
    for name in ("cold", "warm"):
        figures[f"{name}_connects_per_s"] = number(dig(result, name, "connects_per_s"))
        figures[f"{name}_connect_p99_ms"] = number(dig(result, name, "connect_ms", "p99"))
    return figures


def kafka_figures(result: dict[str, Any]) -> Figures:
    figures: Figures = {
        "idle_bytes_per_stream": number(dig(result, "idle", "gateway_bytes_per_idle_stream"))
    }
    for case in result.get("cases", []):
        key = f"{case.get('server')}_{_label(case.get('clients'))}x{_label(case.get('rate'))}"
        figures[f"{key}_delivered_events_per_s"] = number(case.get("delivered_events_per_s"))
        figures[f"{key}_p99_ms"] = number(dig(case, "latency_ms", "p99"))
        per_cpu_s = number(case.get("events_per_server_cpu_s"))
        figures[f"{key}_events_per_server_cpu_s"] = per_cpu_s
        figures[f"{key}_server_us_per_delivery"] = round(1e6 / per_cpu_s, 2) if per_cpu_s else None
    for ratio in dig(result, "kafkasse", "ratio_ssegate_over_kafkasse") or []:
        key = f"over_kafkasse_{ratio.get('clients')}"
        figures[f"{key}_delivered_events_per_s"] = number(ratio.get("delivered_events_per_s"))
    return figures


def pipeline_figures(result: dict[str, Any]) -> Figures:
    figures: Figures = {}
    for case in ("stateless", "windowed"):
        for field in ("first_records_per_s", "warm_median_records_per_s"):
            figures[f"{case}_{field}"] = number(dig(result, case, field))
    for key, entry in (result.get("latency") or {}).items():
        figures[f"latency_{key}_p99_ms"] = number(dig(entry, "p99_ms"))
        figures[f"latency_{key}_sse_p99_ms"] = number(dig(entry, "sse", "p99_ms"))
    return figures


def pipeline_latency_figures(result: dict[str, Any]) -> Figures:
    """The produce → sink and produce → SSE client latency of every trigger the run measured,
    and what the SSE client missed."""
    figures: Figures = {}
    for key, entry in (result.get("latency") or {}).items():
        for field in ("p50_ms", "p99_ms", "received"):
            figures[f"{key}_{field}"] = number(dig(entry, field))
        for field in ("p50_ms", "p99_ms", "received", "missing", "duplicates"):
            figures[f"{key}_sse_{field}"] = number(dig(entry, "sse", field))
    return figures


def soak_figures(result: dict[str, Any]) -> Figures:
    """Per repeat of a long keyed run: lost, p99 and the RSS growth (every sample is in the
    result)."""
    figures: Figures = {}
    for index, case in enumerate(result.get("cases", []), 1):
        key = f"{case.get('gateway')}_{_label(case.get('streams'))}_run{index}"
        figures[f"{key}_lost"] = number(case.get("lost"))
        figures[f"{key}_p99_ms"] = number(dig(case, "latency_ms", "p99"))
        growth = number(case.get("rss_growth_after_first_fifth"))
        figures[f"{key}_rss_growth_after_first_fifth"] = growth
        samples = case.get("rss_mib_samples") or []
        figures[f"{key}_rss_mib_last"] = number(samples[-1][1]) if samples else None
    return figures


def stalled_figures(result: dict[str, Any]) -> Figures:
    """The medians over the run's repeats (``summary.figures``)."""
    figures = dig(result, "summary", "figures") or {}
    return {name: number(dig(spread, "median")) for name, spread in figures.items()}


def failover_figures(result: dict[str, Any]) -> Figures:
    summary = result.get("summary") or {}
    names = ("kills", "lost", "duplicates", "out_of_order", "unexpected", "reconnects",
             "closed_early", "gap_s_median", "gap_s_max")  # fmt: skip
    return {name: number(summary.get(name)) for name in names}


def keyed_figures(result: dict[str, Any]) -> Figures:
    figures: Figures = {}
    for row in result.get("summary", []):
        key = f"{row.get('gateway')}_{_label(row.get('streams'))}"
        figures[f"{key}_p99_ms"] = number(row.get("p99_ms_median"))
        figures[f"{key}_gateway_cpu_share"] = number(row.get("gateway_cpu_share_median"))
        figures[f"{key}_lost"] = number(row.get("lost"))
    return figures


def floor_figures(result: dict[str, Any]) -> Figures:
    """Each pair's ratios to the floor (CPU per delivery, p99), the median over its runs."""
    figures: Figures = {}
    for verdict in result.get("verdicts", []):
        key = f"{verdict.get('transport')}_{_label(verdict.get('clients'))}"
        pairs = [
            pair for pair in result.get("pairs", [])
            if (pair.get("transport"), pair.get("clients"), pair.get("rate"))
            == (verdict.get("transport"), verdict.get("clients"), verdict.get("rate"))
        ]  # fmt: skip
        for figure in ("cpu_us_per_delivery", "p99_ms"):
            ratios = sorted(r for p in pairs if (r := number(dig(p, figure, "ratio"))) is not None)
            figures[f"{key}_{figure}_over_floor"] = ratios[len(ratios) // 2] if ratios else None
    return figures


def fanout_figures(result: dict[str, Any]) -> Figures:
    figures: Figures = {
        f"{name}_over_mercure": number(dig(result, "ratios", name))
        for name in ("throughput_at_p99_target", "memory_per_idle_connection")
    }
    for entry in result.get("ladder", []):
        best = number(entry.get("best_delivered_events_per_s"))
        figures[f"{entry.get('server')}_best_events_per_s_at_p99_target"] = best
    for entry in result.get("idle", []):
        cost = number(entry.get("bytes_per_idle_connection"))
        figures[f"{entry.get('server')}_bytes_per_idle_connection"] = cost
    return figures


_SCENARIOS: dict[str, tuple[str, Callable[[dict[str, Any]], Figures], bool]] = {
    "static": ("static", static_figures, False),
    "idle": ("idle", idle_figures, False),
    "proxy": ("proxy", proxy_figures, True),
    "proxy-idle": ("proxy-idle", proxy_idle_figures, False),
    "jwt": ("jwt", jwt_figures, False),
    "kafka": ("kafka", kafka_figures, False),
    "kafka-throughput": ("kafka", kafka_figures, False),
    "kafka-light": ("kafka", kafka_figures, False),
    "pipeline": ("pipeline", pipeline_figures, False),
    "pipeline-latency": ("pipeline", pipeline_latency_figures, False),
    "fanout": ("fanout", fanout_figures, True),
    "floor": ("floor", floor_figures, False),
    "fanout-tls-h2": ("fanout", fanout_figures, False),
    "keyed": ("keyed", keyed_figures, True),
    "kafka-fanout": ("kafka", kafka_figures, False),
    "proxy-10k": ("proxy", proxy_figures, False),
    "stalled": ("stalled", stalled_figures, False),
    "failover": ("failover", failover_figures, False),
    "keyed-100k": ("keyed", keyed_figures, False),
    "keyed-soak": ("keyed", soak_figures, False),
}
"""Step name → (scenario, headline figures, whether it may plot)."""


JUDGING_STEPS = frozenset(
    {"proxy", "proxy-10k", "kafka", "kafka-throughput", "kafka-light", "kafka-fanout", "fanout",
     "fanout-tls-h2", "pipeline", "pipeline-latency"}
)  # fmt: skip
"""Steps that judge a target from one result per run, so they run :data:`JUDGED_RUNS` times.
``idle``, ``keyed``, ``stalled``, ``failover`` and ``floor`` repeat inside one run (``--runs``,
``--repeat``). ``pipeline`` runs its jobs several times in one Spark session (``--runs``): the
first run of each is a user's first, the rest are warm, and a first run's verdict takes three
sessions."""
JUDGED_RUNS = 3


def _steps(
    sizes: dict[str, tuple[str, float] | tuple[str, float, int]], runs: int = JUDGED_RUNS
) -> tuple[Step, ...]:
    """Steps in the order given: cheap ones first, so a tight bound cuts the costly ones.
    A step of :data:`JUDGING_STEPS` runs ``runs`` times (its timeout is per run), or the times
    its entry gives after the timeout."""
    steps = []
    for name, (args, timeout, *times) in sizes.items():
        scenario, headlines, plot = _SCENARIOS[name]
        repeat = times[0] if times else runs if name in JUDGING_STEPS else 1
        steps.append(Step(name, scenario, tuple(args.split()), timeout, headlines, plot, repeat))
    return tuple(steps)


PROFILES: dict[str, tuple[Step, ...]] = {
    "tiny": _steps(
        {
            "static": ("--duration 1 --connections 4 --runs 1", 120),
            "idle": ("--connections 10000 --tls-connections 20", 120),
            "proxy": ("--clients 3 --rate 50 --duration 1 --protocol h1", 120),
            "proxy-idle": ("--clients 5", 120),
            "jwt": ("--clients 6", 180),
            "kafka": (
                "--clients 3 --rate 100 --duration 1 --idle-clients 4 --kafkasse-clients none",
                180,
            ),
            "pipeline": ("--records 3000 --runs 1 --latency-seconds 1", 300),
            "fanout": (
                "--clients 3 --rate 50 --duration 1 --transports h1 --idle-clients 5"
                " --ladder-rates none",
                300,
            ),
            "keyed": ("--streams 20 --keys 40 --rate 100 --duration 1 --repeat 1 --warmup 1", 180),
            "floor": ("--clients 3 --rate 50 --duration 1 --runs 1 --transports h1", 120),
        },
        runs=1,
    ),
    "quick": _steps(
        {
            "static": ("--duration 1 --connections 20 --runs 1", 60),
            "idle": ("--connections 10000 --tls-connections 10000 --runs 3", 300),
            "proxy": ("--clients 100 --rate 100 --duration 5 --protocol h1,h2", 90),
            "proxy-idle": ("--clients 500", 60),
            "jwt": ("--clients 1000", 120),
            "kafka": (
                "--clients 100,1000 --rate 100,200 --duration 2 --idle-clients 500"
                " --kafkasse-clients none",
                150,
            ),
            # light load: the command of docs/performance.md (its target takes 10 s runs)
            "kafka-light": (
                "--clients 100 --rate 100 --duration 10 --idle-clients 0 --kafkasse-clients none",
                120,
            ),
            # one session: 30,000 records judge nothing (the targets' runs read 1,000,000)
            "pipeline": ("--records 30000 --runs 2 --latency-seconds 2", 240, 1),
            # the ladder's rungs are 4x apart; the bisection resolves them to 10 %; a rung
            # lasts the 3 s the throughput targets take
            # the Mercure targets as stated (2 workers, the pairs and rungs of their length)
            "fanout": (
                "--workers 2 --clients 100,1000 --rate 200,20 --duration 4 --transports h1"
                " --idle-clients 1000 --ladder-rates 200,800,3200 --ladder-duration 3"
                " --ladder-budget 180",
                420,
            ),
            "fanout-tls-h2": (
                "--workers 2 --clients 100,1000 --rate 200,20 --duration 4 --transports tls-h2"
                " --idle-clients 0 --ladder-transport tls-h2 --ladder-rates 200,800,3200"
                " --ladder-duration 3 --ladder-budget 180",
                420,
            ),
            # beside the C floor at two of the target's three sizes
            "floor": (
                "--clients 100,1000 --rate 200,20 --duration 5 --runs 3 --transports h1,tls-h1",
                600,
            ),
            "keyed": ("--streams 1000 --rate 1000 --duration 5 --repeat 1 --warmup 3", 120),
            # the targets below at small sizes and short runs: their figures, and "not
            # measured" at the targets' sizes and run lengths
            "kafka-fanout": (
                "--clients 1000 --rate 30 --duration 3 --idle-clients 0 --kafkasse-clients none",
                120,
            ),
            "proxy-10k": ("--clients 1000 --rate 20 --duration 3 --protocol h1", 90),
            "pipeline-latency": (
                "--records 1000 --runs 1 --cases stateless --validation python"
                " --latency-seconds 3 --latency-triggers 100milliseconds",
                180,
            ),
            "stalled": (
                "--stalled 100 --rate 400 --live 5 --duration 5 --warmup 5"
                " --slow-client-timeout 2 --repeat 1",
                180,
            ),
            "keyed-100k": (
                "--streams 2000 --keys 4000 --rate 5000 --duration 5 --repeat 1 --workers 2"
                " --warmup 3",
                180,
            ),
            "keyed-soak": (
                "--streams 1000 --rate 1160 --duration 30 --repeat 1 --rss-every 3 --warmup 3",
                180,
            ),
            # three Kafka nodes
            "failover": (
                "--clients 100 --rate 200 --repeat 1 --warmup 3 --hold 3 --heap 256m",
                480,
            ),
        }
    ),
    "full": _steps(
        {
            "static": ("--duration 3 --runs 3", 180),
            "idle": ("--connections 100000 --tls-connections 40000 --runs 3", 600),
            "proxy": ("--clients 1,100,1000 --rate 1000,100,10 --duration 5 --protocol h1,h2", 300),
            "proxy-idle": ("--clients 1000", 120),
            "jwt": ("--clients 10000", 300),
            # KafkaSSE at 1,000 clients too: it opens a few hundred in the harness's wait, and
            # the ratio is measured on what it delivers to those.
            "kafka": ("--kafkasse-clients 1,100,1000", 900),
            # 1.1M/s offered, so that "1M/s delivered" can be met or missed rather than capped.
            "kafka-throughput": (
                "--clients 100,1000 --rate 100,1100 --duration 5 --idle-clients 0"
                " --kafkasse-clients none",
                300,
            ),
            # light load: the command of docs/performance.md
            "kafka-light": (
                "--clients 100 --rate 100 --duration 10 --idle-clients 0 --kafkasse-clients none",
                300,
            ),
            # three sessions, each a user's first run of each job and three warm ones (the
            # latency targets are the pipeline-latency step's; docs/performance.md runs them all)
            "pipeline": (
                "--records 1000000 --runs 4 --validation python --latency-triggers"
                " 100milliseconds --latency-seconds 2",
                1200,
            ),
            # one gateway process per core, as the Mercure targets are stated
            "fanout": ("--workers 2", 900),
            # the same ladder over TLS h2 (the equal-load pairs of that transport are above)
            "fanout-tls-h2": (
                "--workers 2 --transports tls-h2 --idle-clients 0 --ladder-transport tls-h2",
                600,
            ),
            # docs/performance.md's command: beside the C floor at the target's three sizes
            "floor": (
                "--clients 100,1000,10000 --transports h1,tls-h1 --runs 3 --duration 5",
                1800,
            ),
            # docs/performance.md's command, three times: 20,000 streams in one process, over
            # h2c (one process holds at most 20,000 open files here, so not over HTTP/1.1)
            "keyed": (
                "--streams 20000 --keys 50000 --rate 1000 --duration 300 --repeat 3"
                " --h2-streams 250",
                1800,
            ),
            # 10,000 subscribers x 30 msg/s: one event per write while the gateway keeps up
            "kafka-fanout": (
                "--clients 10000 --rate 30 --duration 5 --idle-clients 0 --kafkasse-clients none",
                600,
            ),
            "proxy-10k": (
                "--clients 10000 --rate 2 --duration 5 --protocol h1 --client-processes 2",
                300,
            ),
            "pipeline-latency": (
                "--records 1000 --runs 1 --cases stateless --validation python"
                " --latency-seconds 30 --latency-triggers 100milliseconds",
                360,
            ),
            "stalled": (
                "--stalled 1000 --rate 400 --live 20 --duration 30 --size 100 --warmup 60"
                " --repeat 3",
                1200,
            ),
            "failover": ("--clients 1000 --rate 200 --repeat 3", 1800),
            # docs/performance.md's command, three times (a verdict takes the median of 3)
            "keyed-100k": (
                "--streams 100000 --keys 200000 --rate 5000 --duration 300 --repeat 3 --workers 6",
                3600,
            ),
            # 30 minutes at the reported 10M messages a day x10, three times; 19,000 streams
            "keyed-soak": (
                "--streams 19000 --rate 1160 --duration 1800 --repeat 3 --rss-every 30",
                6600,
            ),
        }
    ),
}
"""Profile name → its steps."""

BOUNDS: dict[str, float] = {"tiny": 900.0, "quick": 2700.0, "full": 28800.0}
"""Profile name → seconds the whole run may take; a step never runs past it."""

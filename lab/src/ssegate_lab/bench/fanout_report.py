"""What a fan-out run reports beyond its cases: the ssegate/Mercure ratios and the plot.

:func:`ratios` pairs each ssegate case with the Mercure case of the same transport, clients
and rate, and divides: delivered events/s, p99, events per server CPU-second and per fan-out
CPU-second (the server's CPU less its publish path, :mod:`ssegate_lab.bench.fanout`); then memory
per idle connection, and the throughput each server reached under the p99 target, judged by
:func:`ssegate_lab.bench.ladder.compare` (a ratio of 0 when ssegate passed no rate and Mercure did).
:func:`plot_fanout` draws delivered events/s against clients, every case's latency CDF, and
p99 against the offered load on each server's ladder (matplotlib, Agg backend; optional).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ssegate_lab.bench.ladder import compare
from ssegate_lab.bench.latency import LatencyHistogram


def _ratio(ours: float | None, theirs: float | None) -> float | None:
    return round(ours / theirs, 2) if ours and theirs else None


def ratios(results: dict[str, Any]) -> dict[str, Any]:
    """ssegate over Mercure: each pair at equal load, memory per idle connection, equal p99."""
    by_key = {(c["server"], c["transport"], c["clients"], c["rate"]): c for c in results["cases"]}
    pairs = []
    for (server, transport, count, rate), ours in by_key.items():
        theirs = by_key.get(("mercure", transport, count, rate))
        if server != "ssegate" or theirs is None:
            continue
        pairs.append(
            {
                "transport": transport,
                "clients": count,
                "rate": rate,
                "delivered_events_per_s": _ratio(
                    ours["delivered_events_per_s"], theirs["delivered_events_per_s"]
                ),
                "p99_ms": _ratio(ours["latency_ms"]["p99"], theirs["latency_ms"]["p99"]),
                "events_per_server_cpu_s": _ratio(
                    ours["events_per_server_cpu_s"], theirs["events_per_server_cpu_s"]
                ),
                "events_per_server_fanout_cpu_s": _ratio(
                    ours.get("events_per_server_fanout_cpu_s"),
                    theirs.get("events_per_server_fanout_cpu_s"),
                ),
            }
        )
    idle = {entry["server"]: entry["bytes_per_idle_connection"] for entry in results["idle"]}
    ladders = {entry["server"]: entry for entry in results["ladder"]}
    throughput: dict[str, Any] = {"throughput_at_p99_target": None}
    if "ssegate" in ladders and "mercure" in ladders:
        judged = compare(ladders["ssegate"], ladders["mercure"], ("ssegate", "Mercure"))
        throughput = {
            "throughput_at_p99_target": judged.ratio,
            "throughput_at_p99_target_status": judged.status,
            "throughput_at_p99_target_note": judged.note,
        }
    return {
        "reading": "ssegate / Mercure: above 1 means ssegate has more of it (for p99_ms and"
        " memory, more is worse)",
        "pairs": pairs,
        "memory_per_idle_connection": _ratio(idle.get("ssegate"), idle.get("mercure")),
        **throughput,
    }


def plot_fanout(results: dict[str, Any], path: Path) -> str:
    """A PNG: delivered events/s against clients, every case's latency CDF, the p99 ladders."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "no plot: matplotlib is not installed (pip install matplotlib)"
    figure, (rates, cdfs, ladder) = plt.subplots(1, 3, figsize=(17, 4.8))
    colours = {"ssegate": "tab:blue", "mercure": "tab:orange"}
    styles = {"h1": "-", "tls-h1": "--", "tls-h2": ":"}
    most = max((case["clients"] for case in results["cases"]), default=0)
    lines: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for case in results["cases"]:
        server, transport = case["server"], case["transport"]
        lines.setdefault((server, transport), []).append(
            (case["clients"], case["delivered_events_per_s"])
        )
        points = LatencyHistogram.from_sparse(case["histogram_us"]).cdf()
        if not points:
            continue
        xs, ys = zip(*points, strict=True)
        cdfs.step(
            xs,
            ys,
            where="post",
            label=f"{server} {transport} {case['clients']} x {case['rate']:g}/s",
            color=colours[server],
            linestyle=styles[transport],
            linewidth=2.0 if case["clients"] == most else 1.0,
        )
    for (server, transport), values in lines.items():
        xs, ys = zip(*sorted(values), strict=True)
        rates.plot(
            xs, ys, marker="o", color=colours[server], linestyle=styles[transport],
            label=f"{server} {transport}",
        )  # fmt: skip
    for entry in results["ladder"]:
        steps = sorted(
            (s for s in entry["steps"] if s["latency_ms"]["p99"] is not None),
            key=lambda s: s["offered_events_per_s"],
        )  # the bisection's steps come after the climb's
        ladder.plot(
            [s["offered_events_per_s"] for s in steps],
            [s["latency_ms"]["p99"] for s in steps],
            marker="o", color=colours[entry["server"]],
            label=f"{entry['server']}, {entry['clients']} clients",
        )  # fmt: skip
    ladder.axhline(results["p99_target_ms"], color="grey", linestyle="--", linewidth=1)
    ladder.set_xscale("log")
    ladder.set_yscale("log")
    ladder.set_xlabel("offered deliveries/s (h1)")
    ladder.set_ylabel("p99 latency (ms)")
    ladder.set_title(f"p99 ladder (target {results['p99_target_ms']:g} ms)")
    ladder.grid(True, which="both", alpha=0.3)
    ladder.legend(fontsize=8)
    top = max((case["delivered_events_per_s"] for case in results["cases"]), default=0.0)
    rates.set_ylim(0, top * 1.1 or 1.0)
    rates.set_xscale("log")
    rates.set_xlabel("clients")
    rates.set_ylabel("delivered events/s")
    rates.set_title("delivered events/s (same load on both)")
    rates.grid(True, which="both", alpha=0.3)
    rates.legend(fontsize=8)
    cdfs.set_xscale("log")
    cdfs.set_xlabel("publish to receive latency (ms)")
    cdfs.set_ylabel("fraction of events")
    cdfs.set_title("latency CDF")
    cdfs.grid(True, which="both", alpha=0.3)
    cdfs.legend(fontsize=7)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return f"plot written to {path}"

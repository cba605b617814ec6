"""``ssegate bench keyed``: many streams, each filtering on its own key, on a real broker.

The workload users run is not N identical subscribers but one stream per device, user or
tenant (``/events/{id}`` → ``filters: [{key: ${params.id}}]``): each message concerns few
streams and most streams want nothing from most batches. Per case:

1. a fresh topic of ``partitions`` partitions; with ``history`` H, H keyed messages are
   produced into it before any stream opens, so every stream opens over a cache holding them
   and is owed its key's share (``history_s``: from the first connect until every stream has
   it; ``opening_gateway_cpu_s``: what opening and replaying cost the gateway);
2. ``streams`` held streams open ``/<topic>/k<i>`` for ``i < streams``, each filtered on the
   key ``k<i>`` (``filter_mode``: on the Kafka key, on a header carrying it, or on a header the
   cache server extracts from the value: :mod:`~ssegate_lab.bench.keyed_filter`), spread
   over as many client processes as the open-file limit needs: one HTTP/1.1 connection each,
   or with ``h2_streams`` N, N streams on each HTTP/2 connection (h2c), so that one gateway
   process may hold more streams than it may open files;
3. with ``warmup`` W s, the producer first writes ``rate`` messages/s for W s under keys no
   stream filters on (``w<j>``), so the measured window starts with the producer connected, the
   broker's JVM compiled and the gateway's fetch, cache and index at their steady load rather
   than at a cold start no running deployment sees again; no stream is owed any of them, and
   every one a stream receives counts as **misdelivered** (a filter that let a foreign key
   through), which fails the case;
4. the producer writes ``rate`` messages/s for ``duration`` s, each key drawn uniformly from
   ``keys`` keys (``k0`` … ``k<keys-1>``; only the first ``streams`` have a stream), value
   ``{"t":<monotonic_ns>,"n":<that key's own sequence number>}``, partitioned by key (the
   key, header or field each record carries it in is the filter mode's);
5. after a drain, per case: **owed** (messages produced for a key with a stream), received,
   **duplicates** (a sequence number the stream had already had), **lost**
   (owed - (received - duplicates)), gaps, latency from produce to receive, the gateway's CPU
   as a share of one core over the produce-and-drain window, and the busiest client process's
   CPU share (``client_saturated`` above :data:`~ssegate_lab.bench.validity.SATURATED_SHARE`).

A case is complete when nothing was lost, duplicated or misdelivered and no stream closed
early. With ``baseline_src`` every case runs again, in the same run, on a gateway imported from
another source tree (a checkout of an earlier commit), so before and after are measured side by
side.
``repeat`` runs each case that many times; the summary takes medians.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ssegate_lab import loop_lag, loop_lag_report
from ssegate_lab.bench import validity
from ssegate_lab.bench.gateway import GatewayProcess
from ssegate_lab.bench.held_streams import HeldStreams, sse_request
from ssegate_lab.bench.kafka_rig import (
    BenchBroker,
    Record,
    new_producer,
    produce_at_rate,
    write_kafka_gateway_config,
)
from ssegate_lab.bench.keyed_filter import check_filter, filter_routes, keyed_record, topic_options
from ssegate_lab.bench.rss_samples import RssSamples
from ssegate_lab.bench.trace_sink import TraceSink
from ssegate_lab.broker import BrokerInfo

STREAMS_PER_CLIENT = 9_000
"""Streams one client process holds (the open-file limit is 20,000 per process)."""
SETTLE_SECONDS = 2.0
DRAIN_SECONDS = 3.0
GATEWAY_LINES = 5_000
"""Output lines kept of each case's gateway, for the warnings its result keeps."""
HISTORY_RATE = 50_000.0
"""Messages/s at which ``history`` is produced before the streams open."""
HISTORY_WAIT_SECONDS = 120.0


def run_keyed(
    streams: list[int],
    *,
    rate: float = 1000.0,
    duration: float = 30.0,
    keys: int = 50_000,
    partitions: int = 3,
    repeat: int = 1,
    baseline_src: Path | None = None,
    broker_info: BrokerInfo | None = None,
    workers: int = 1,
    default_offset: str | None = None,
    rss_every: float = 0.0,
    history: int = 0,
    h2_streams: int = 0,
    warmup: float = 0.0,
    filter_mode: str = "key",
    trace_sampling: float | None = None,
    loop_lag_dir: Path | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Every stream count ``repeat`` times on this gateway (and on ``baseline_src``'s), with
    ``workers`` gateway processes sharing the port (each holds the streams the kernel gives it
    and reads the topic for them; the CPU figures add up all of them). ``default_offset`` sets
    the topics' ``defaultOffset``; ``rss_every`` samples the gateway's RSS that often while
    producing (a soak: does memory stay flat?). ``history`` messages are produced before the
    streams open, so each opens over a cache that holds them and is owed its key's share (what
    does opening a filtered stream over a full cache cost?). ``h2_streams`` > 0 holds that many
    streams on each HTTP/2 connection. ``warmup`` s of messages no stream wants come before
    the measured window. ``filter_mode`` is what the streams filter on (one of
    :data:`~ssegate_lab.bench.keyed_filter.FILTERS`). ``trace_sampling``: traces to a collector
    (:mod:`~.trace_sink`). ``loop_lag_dir``: every gateway process writes its event loop's slow
    moments there (:mod:`ssegate_lab.loop_lag`), and each case keeps those of its measured window
    per worker. ``progress`` gets the results so far after every case."""
    if any(count > keys for count in streams):
        raise ValueError("each stream needs a key of its own: streams must not exceed keys")
    check_filter(filter_mode)
    variants: list[tuple[str, dict[str, str]]] = [("ssegate", {})]
    if baseline_src is not None:
        variants.append(("baseline", {"PYTHONPATH": str(baseline_src.resolve() / "src")}))
    if loop_lag_dir is not None:
        variants = [(name, loop_lag.profiled_env(env, loop_lag_dir)) for name, env in variants]
    results: dict[str, Any] = {
        "scenario": "keyed",
        "rate": rate,
        "duration_s": duration,
        "keys": keys,
        "partitions": partitions,
        "repeat": repeat,
        "gateway_workers": workers,
        "default_offset": default_offset or "historical",
        "history": history,
        "warmup_s": warmup,
        "filter": filter_mode,
        "trace_sampling": trace_sampling,
        "loop_lag_dir": str(loop_lag_dir) if loop_lag_dir else None,
        "protocol": f"h2c, {h2_streams} streams per connection" if h2_streams else "http/1.1",
        "baseline_src": str(baseline_src) if baseline_src else None,
        "baseline_commit": _commit_of(baseline_src) if baseline_src else None,
        "cases": [],
    }
    plan = [count for count in streams for _ in range(repeat)]
    with contextlib.ExitStack() as held:
        broker = held.enter_context(BenchBroker(broker_info))
        tmp = held.enter_context(tempfile.TemporaryDirectory())
        sink = None if trace_sampling is None else held.enter_context(TraceSink(Path(tmp)))
        traces = None if sink is None else (sink.port, trace_sampling or 0.0)
        for count in plan:
            for variant, env in variants:  # side by side: each case on both, in turn
                (topic,) = broker.create_topics(f"bench-keyed-{variant}", 1, partitions)
                ports = write_kafka_gateway_config(
                    Path(tmp), broker.bootstrap, [topic], keyed=True,
                    default_offset=default_offset, routes=filter_routes(filter_mode),
                    topic_options=topic_options(filter_mode), traces=traces,
                )  # fmt: skip
                # a fresh gateway per case: one that fell behind cannot slow the next case
                with GatewayProcess(
                    ports.config, env=env, workers=workers, history=GATEWAY_LINES
                ) as gateway:
                    case = _case(
                        gateway, ports.plain, broker.bootstrap, topic, count, rate, duration,
                        keys, rss_every, history, h2_streams, warmup, filter_mode, partitions,
                    )  # fmt: skip
                case["gateway"] = variant
                case["spans_received"] = sink.spans() if sink is not None else None  # in the run
                if loop_lag_dir is not None:
                    case["loop_lag"] = loop_lag_report.case_summary(loop_lag_dir, case, gateway.pid)
                results["cases"].append(case)
                print(json.dumps(_brief(case)), flush=True)
                if progress is not None:
                    progress(results)
    results["summary"] = summarize(results["cases"])
    return results


def _case(
    gateway: GatewayProcess,
    port: int,
    bootstrap: str,
    topic: str,
    count: int,
    rate: float,
    duration: float,
    keys: int,
    rss_every: float = 0.0,
    history: int = 0,
    h2_streams: int = 0,
    warmup: float = 0.0,
    filter_mode: str = "key",
    partitions: int = 3,
) -> dict[str, Any]:
    sequence = [0] * keys
    shape = _Shape(filter_mode, partitions)
    producer = new_producer(bootstrap)
    history_owed = 0
    if history:
        history_rate = max(rate, HISTORY_RATE)
        _, history_owed = _produce_keyed(
            producer, topic, history_rate, history / history_rate, keys, count, sequence, shape
        )
        time.sleep(SETTLE_SECONDS)  # the gateway's fetch caches it meanwhile
    clients = [
        HeldStreams(port, max_streams=STREAMS_PER_CLIENT + 100, concurrency=128, sources=16)
        for _ in range(max(1, math.ceil(count / STREAMS_PER_CLIENT)))
    ]
    for client in clients:
        client.__enter__()
    try:
        started = time.monotonic()
        opening = gateway.sample()
        opened = failed = 0
        for index, client in enumerate(clients):
            first = index * STREAMS_PER_CLIENT
            last = min(count, first + STREAMS_PER_CLIENT)
            if h2_streams:
                paths = [f"/{topic}/k{i}" for i in range(first, last)]
                result = client.open_h2(paths, h2_streams)
            else:
                requests = [sse_request(f"/{topic}/k{i}", port) for i in range(first, last)]
                result = client.open(requests)
            opened += result.opened
            failed += result.failed
        open_seconds = time.monotonic() - started
        replayed = _await_history(clients, history_owed, started)
        opening_cpu = gateway.sample().cpu_seconds - opening.cpu_seconds
        time.sleep(SETTLE_SECONDS)
        for client in clients:
            client.report()  # forget anything counted while opening
        misdelivered = warmed = 0
        if warmup > 0:
            warmed = _produce_unwanted(producer, topic, rate, warmup, keys, shape)
            time.sleep(SETTLE_SECONDS)
            misdelivered = sum(client.report().received for client in clients)
        before = gateway.sample()
        window_started = time.monotonic()
        rss = RssSamples(gateway, rss_every)
        produced, owed = _produce_keyed(
            producer, topic, rate, duration, keys, count, sequence, shape
        )
        rss.stop()
        time.sleep(DRAIN_SECONDS)
        after = gateway.sample()
        window_ended = time.monotonic()
        collections = gateway.collections_in(window_started, window_ended)
        deliveries = [client.report() for client in clients]
        for client in clients:
            client.close()
    finally:
        for client in clients:
            client.__exit__()
    received = sum(d.received for d in deliveries)
    duplicates = sum(d.duplicates for d in deliveries)
    window = duration + DRAIN_SECONDS
    gateway_cpu = after.cpu_seconds - before.cpu_seconds
    latency = _merge_latency([d.latency_ms_sampled for d in deliveries])
    lost = owed - (received - duplicates) + replayed.lost
    duplicates += replayed.duplicates
    return {
        "streams": count,
        "opened": opened,
        "failed": failed,
        "open_s": round(open_seconds, 1),
        "history_owed": history_owed,
        "history_received": replayed.received,
        "history_s": replayed.seconds,
        "opening_gateway_cpu_s": round(opening_cpu, 2),
        "produced": produced,
        "owed": owed,
        "received": received,
        "duplicates": duplicates,
        "lost": lost,
        "gaps": sum(d.gaps for d in deliveries),
        "late": sum(d.late for d in deliveries),
        "closed_early": sum(d.closed_early for d in deliveries),
        "warmup_produced": warmed,
        "misdelivered": misdelivered,
        "complete": lost == 0
        and duplicates == 0
        and misdelivered == 0
        and failed == 0
        and not any(d.closed_early for d in deliveries),
        "latency_ms": latency,
        "gateway_cpu_share": round(gateway_cpu / window, 3),
        "gateway_us_per_message": round(gateway_cpu * 1e6 / max(1, produced), 1),
        "gateway_rss_mib": round(after.rss_bytes / 2**20, 1),
        "gateway_warnings": gateway.warnings(),
        "window_monotonic_s": [round(window_started, 3), round(window_ended, 3)],
        **collections,
        **validity.client_load([d.cpu_seconds for d in deliveries], window),
        **rss.summary(),
    }


@dataclass(frozen=True, slots=True)
class _Replayed:
    received: int
    duplicates: int
    lost: int
    seconds: float | None
    """From the first connect until every stream had its history; ``None``: never."""


def _await_history(clients: list[HeldStreams], owed: int, started: float) -> _Replayed:
    """Wait (up to :data:`HISTORY_WAIT_SECONDS`) until the streams got the history they are
    owed; what they got, counted once."""
    received = duplicates = 0
    seconds: float | None = None
    deadline = time.monotonic() + HISTORY_WAIT_SECONDS
    while owed:
        for client in clients:
            delivery = client.report()
            received += delivery.received
            duplicates += delivery.duplicates
        if received - duplicates >= owed:
            seconds = round(time.monotonic() - started, 2)
            break
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    return _Replayed(received, duplicates, max(0, owed - (received - duplicates)), seconds)


@dataclass(frozen=True, slots=True)
class _Shape:
    """How a case's records carry their key: the filter mode, over ``partitions``."""

    mode: str
    partitions: int


def _produce_keyed(
    producer: Any,
    topic: str,
    rate: float,
    duration: float,
    keys: int,
    streamed: int,
    sequence: list[int],
    shape: _Shape,
) -> tuple[int, int]:
    """``rate`` keyed messages/s for ``duration`` s: (produced, owed to the streams). Each key's
    messages are numbered on from ``sequence``, which is updated."""
    pick = random.Random(20261124 + sum(sequence)).randrange
    owed = 0
    mode, partitions = shape.mode, shape.partitions

    def message(stamp: int) -> Record:
        nonlocal owed
        key = pick(keys)
        number = sequence[key]
        sequence[key] += 1
        owed += key < streamed
        return keyed_record(mode, b"k%d" % key, stamp, number, key % partitions)

    produced = produce_at_rate(producer, topic, rate, duration, records=message)
    return produced.messages, owed


def _produce_unwanted(
    producer: Any, topic: str, rate: float, duration: float, keys: int, shape: _Shape
) -> int:
    """``rate`` messages/s for ``duration`` s under keys no stream filters on (``w<j>``, spread
    over the partitions like the measured ones), stamped like them; how many."""
    pick = random.Random(20261127).randrange
    mode, partitions = shape.mode, shape.partitions

    def message(stamp: int) -> Record:
        key = pick(keys)
        return keyed_record(mode, b"w%d" % key, stamp, 0, key % partitions)

    return produce_at_rate(producer, topic, rate, duration, records=message).messages


def _commit_of(tree: Path) -> str | None:
    """The short commit of a checkout, to name the baseline by."""
    try:
        found = subprocess.run(
            ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, timeout=10, check=True,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return found.stdout.strip() or None


def _merge_latency(summaries: list[dict[str, float | None]]) -> dict[str, float | None]:
    """The worst of each percentile over the client processes (each holds a share of streams)."""
    merged: dict[str, float | None] = {}
    for summary in summaries:
        for name, value in summary.items():
            if value is None:
                merged.setdefault(name, None)
                continue
            current = merged.get(name)
            merged[name] = value if current is None else max(current, value)
    return merged


def summarize(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per gateway and stream count: medians over the repeats, and whether all were complete."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for case in cases:
        groups.setdefault((case["gateway"], case["streams"]), []).append(case)
    rows = []
    for (gateway, count), runs in sorted(groups.items()):
        p99 = [r["latency_ms"].get("p99") for r in runs]
        rows.append(
            {
                "gateway": gateway,
                "streams": count,
                "runs": len(runs),
                "all_complete": all(r["complete"] for r in runs),
                "lost": sum(r["lost"] for r in runs),
                "duplicates": sum(r["duplicates"] for r in runs),
                "p99_ms_median": _median([v for v in p99 if v is not None]),
                "gateway_cpu_share_median": _median([r["gateway_cpu_share"] for r in runs]),
                "gateway_us_per_message_median": _median(
                    [r["gateway_us_per_message"] for r in runs]
                ),
                "client_cpu_share_median": _median([r["client_cpu_share"] for r in runs]),
                "client_saturated_runs": sum(1 for r in runs if r.get("client_saturated")),
            }
        )
    return rows


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def _brief(case: dict[str, Any]) -> dict[str, Any]:
    keep = ("gateway", "streams", "owed", "received", "lost", "duplicates", "complete",
            "gateway_cpu_share", "client_cpu_share")  # fmt: skip
    return {**{k: case[k] for k in keep}, "p99_ms": case["latency_ms"].get("p99")}


def plot_keyed(results: dict[str, Any], path: Path) -> str:
    """Two panels per gateway: gateway CPU per produced message, and p99, against streams."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "no plot: matplotlib is not installed (pip install matplotlib)"
    figure, (cost, tail) = plt.subplots(1, 2, figsize=(11, 4.2))
    colours = {"ssegate": "tab:blue", "baseline": "tab:grey"}
    for gateway in sorted({row["gateway"] for row in results["summary"]}):
        rows = [row for row in results["summary"] if row["gateway"] == gateway]
        streams = [row["streams"] for row in rows]
        before = results.get("baseline_commit") or results.get("baseline_src")
        label = gateway if gateway == "ssegate" else f"before ({before})"
        cost.plot(streams, [row["gateway_us_per_message_median"] for row in rows], marker="o",
                  color=colours.get(gateway), label=label)  # fmt: skip
        tail.plot(streams, [row["p99_ms_median"] for row in rows], marker="o",
                  color=colours.get(gateway), label=label)  # fmt: skip
        for row in rows:
            if not row["all_complete"]:
                tail.annotate("loss", (row["streams"], row["p99_ms_median"] or 0), color="red")
    rate = f"{results['rate']:g} msg/s over {results['keys']:,} keys"
    cost.set_title(f"gateway CPU per produced message ({rate})")
    cost.set_ylabel("µs of gateway CPU per message")
    tail.set_title("p99 produce → receive (median of runs)")
    tail.set_ylabel("ms")
    for axes in (cost, tail):
        axes.set_xscale("log")
        axes.set_yscale("log")
        axes.set_xlabel("streams, each filtering on its own key")
        axes.grid(True, which="both", alpha=0.3)
        axes.legend(fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return f"plot written to {path}"

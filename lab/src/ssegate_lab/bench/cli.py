"""``ssegate bench SCENARIO``: run a benchmark and write its results as JSON.

Every scenario is bounded in time and connection count and stops by itself; every address it
sends to is on loopback. Results go to ``bench-results/<scenario>-<UTC time>.json`` (or
``--out``) and are printed. Every command takes, as it starts, what its result files record of
how they were measured (:func:`~ssegate_lab.bench.result_file.started`: the command line, the
commit and whether its tree was clean, the machine's load average) and writes them through
:func:`~ssegate_lab.bench.result_file.write`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ssegate_lab.bench.result_file import default_path, started, write

Command = Callable[[argparse.Namespace], int]


def add_bench_parser(commands: Any) -> None:
    bench = commands.add_parser(
        "bench",
        help="run a benchmark against a real gateway process",
        description="Run one benchmark scenario against a gateway started for it; results are"
        " written as JSON.",
    )
    scenarios = bench.add_subparsers(title="scenarios", metavar="SCENARIO", required=True)

    from ssegate_lab.bench.suite import add_all_parser

    add_all_parser(scenarios)  # `all`: every scenario below in turn, one summary

    from ssegate_lab.bench.floor import add_floor_parser

    add_floor_parser(scenarios)  # `floor`: ssegate beside the reference fan-out server in C

    static = scenarios.add_parser(
        "static", help="static file requests/s over HTTP/1.1 (wrk) and h2 (h2load)"
    )
    static.add_argument("--duration", type=float, default=5.0, help="seconds per tool run")
    static.add_argument("--connections", type=int, default=50)
    static.add_argument("--workers", type=int, default=1)
    static.add_argument("--runs", type=int, default=3, help="runs per tool; the median is kept")
    static.add_argument("--out", type=Path, default=None, help="JSON file to write")
    static.set_defaults(func=_static)

    idle = scenarios.add_parser("idle", help="gateway RSS per idle connection, plain and TLS")
    idle.add_argument("--connections", type=int, default=10_000)
    idle.add_argument(
        "--tls-connections", type=int, default=None, help="default: --connections; 0: no TLS"
    )
    idle.add_argument("--runs", type=int, default=1, help="runs per phase; the median is kept")
    idle.add_argument("--workers", type=int, default=None, help="default: what the limits need")
    idle.add_argument("--client-processes", type=int, default=None)
    idle.add_argument("--out", type=Path, default=None)
    idle.set_defaults(func=_idle)

    proxy = scenarios.add_parser(
        "proxy", help="events/s and latency through the SSE proxy, per protocol and client count"
    )
    proxy.add_argument("--clients", type=_int_list, default=[1, 100, 1000])
    proxy.add_argument(
        "--rate",
        type=_int_list,
        default=[1000, 100, 10],
        help="published events/s: one value, or one per client count",
    )
    proxy.add_argument("--duration", type=float, default=5.0, help="seconds of publishing")
    proxy.add_argument("--protocol", type=_protocols, default=("h1", "h2"), help="h1,h2")
    proxy.add_argument("--workers", type=int, default=1, help="gateway worker processes")
    proxy.add_argument("--tls", action="store_true", help="connect over TLS")
    proxy.add_argument("--client-processes", type=int, default=1)
    proxy.add_argument("--h2-streams", type=int, default=1, help="h2 streams per connection")
    proxy.add_argument(
        "--h2-client", choices=["h2load", "python"], default="h2load",
        help="who holds most h2 streams (the Python client always holds a few, for latency)",
    )  # fmt: skip
    proxy.add_argument("--size", type=int, default=0, help="pad event data to this many bytes")
    proxy.add_argument("--plot", type=Path, default=None, help="PNG of latency CDFs")
    proxy.add_argument("--out", type=Path, default=None)
    proxy.set_defaults(func=_proxy)

    proxy_idle = scenarios.add_parser("proxy-idle", help="gateway RSS per idle proxied client")
    proxy_idle.add_argument("--clients", type=int, default=1000)
    proxy_idle.add_argument("--protocol", choices=["h1", "h2"], default="h1")
    proxy_idle.add_argument("--tls", action="store_true")
    proxy_idle.add_argument("--out", type=Path, default=None)
    proxy_idle.set_defaults(func=_proxy_idle)

    fanout = scenarios.add_parser(
        "fanout", help="plain SSE fan-out, ssegate and Mercure pair by pair: events/s, p99, RSS"
    )
    fanout.add_argument("--clients", type=_int_list, default=[100, 1000])
    fanout.add_argument(
        "--rate", type=_int_list, default=[200, 20], help="events/s: one, or one per client count"
    )
    fanout.add_argument("--duration", type=float, default=4.0, help="seconds of publishing")
    fanout.add_argument(
        "--transports", type=_fanout_transports, default=("h1", "tls-h1", "tls-h2"),
        help="h1 (plain), tls-h1, tls-h2",
    )  # fmt: skip
    fanout.add_argument("--idle-clients", type=int, default=1000, help="0: skip the idle part")
    fanout.add_argument("--ladder-clients", type=int, default=100)
    fanout.add_argument(
        "--ladder-rates", type=_counts_or_none, default=None,
        help="events/s climbed until p99 > 50 ms, then bisected to 10 %% (default 200 ... 2200;"
        " 'none': no ladder)",
    )  # fmt: skip
    fanout.add_argument("--ladder-duration", type=float, default=3.0)
    fanout.add_argument(
        "--ladder-transport", choices=["h1", "tls-h1", "tls-h2"], default="h1",
        help="the transport the ladder climbs over",
    )  # fmt: skip
    fanout.add_argument(
        "--ladder-budget", type=float, default=180.0,
        help="seconds the climb and the bisection to 10 %% may take",
    )  # fmt: skip
    fanout.add_argument("--mercure-transport", choices=["local", "bolt"], default="local")
    fanout.add_argument(
        "--mercure-publish-cost", choices=["separated", "included"], default="separated",
        help="separated: measure the hub's publish path (POST + JWT per event) alone and report"
        " its fan-out CPU without it; included: the hub's CPU whole",
    )  # fmt: skip
    fanout.add_argument(
        "--h2-client", choices=["h2load", "python"], default="h2load",
        help="who holds most streams of the tls-h2 cases",
    )  # fmt: skip
    fanout.add_argument("--without-mercure", action="store_true", help="ssegate alone")
    fanout.add_argument("--client-processes", type=int, default=1)
    fanout.add_argument("--workers", type=int, default=1, help="gateway worker processes")
    fanout.add_argument("--plot", type=Path, default=None, help="PNG: events/s and latency CDFs")
    fanout.add_argument("--out", type=Path, default=None)
    fanout.set_defaults(func=_fanout)

    jwt = scenarios.add_parser(
        "jwt", help="connects/s, connect latency and RSS of N streams each with its own JWT"
    )
    jwt.add_argument("--clients", type=int, default=10_000)
    jwt.add_argument("--tls", action="store_true", help="connect over TLS")
    jwt.add_argument("--key-type", choices=["ec", "rsa", "ed25519"], default="ec")
    jwt.add_argument("--concurrency", type=int, default=64, help="connects in flight")
    jwt.add_argument(
        "--verify-only", action="store_true",
        help="only the in-process cost of verifying a token (no gateway, no broker)",
    )  # fmt: skip
    jwt.add_argument("--count", type=int, default=2000, help="--verify-only: tokens per run")
    jwt.add_argument("--runs", type=int, default=5, help="--verify-only: runs (the median)")
    jwt.add_argument("--out", type=Path, default=None)
    jwt.set_defaults(func=_jwt)

    kafka = scenarios.add_parser(
        "kafka", help="Kafka produce to N SSE clients: events/s, latency; KafkaSSE alongside"
    )
    kafka.add_argument("--clients", type=_int_list, default=[1, 100, 1000])
    kafka.add_argument(
        "--rate",
        type=_int_list,
        default=[5000, 1000, 200],
        help="produced messages/s: one value, or one per client count",
    )
    kafka.add_argument("--duration", type=float, default=5.0, help="seconds of producing")
    kafka.add_argument("--idle-clients", type=int, default=1000, help="0: skip the idle part")
    kafka.add_argument(
        "--kafkasse-clients",
        type=_counts_or_none,
        default=[1, 100],
        help="client counts also served by KafkaSSE ('none' to skip it)",
    )
    kafka.add_argument(
        "--model",
        choices=["none", "json", "avro"],
        default="none",
        help="a model checking every value of ssegate's topics (avro: produced as Avro, view json)",
    )
    kafka.add_argument("--workers", type=int, default=1, help="gateway worker processes")
    kafka.add_argument("--out", type=Path, default=None)
    kafka.set_defaults(func=_kafka)

    from ssegate_lab.loop_lag_report import writable_directory

    keyed = scenarios.add_parser(
        "keyed", help="N streams each filtering on its own key: loss, duplicates, p99, CPU"
    )
    keyed.add_argument("--streams", type=_int_list, default=[1000, 10_000])
    keyed.add_argument("--rate", type=float, default=1000.0, help="keyed messages/s produced")
    keyed.add_argument("--duration", type=float, default=30.0, help="seconds of producing")
    keyed.add_argument("--keys", type=int, default=50_000, help="distinct keys produced")
    keyed.add_argument("--partitions", type=int, default=3)
    keyed.add_argument("--repeat", type=int, default=3, help="runs per case; medians kept")
    keyed.add_argument(
        "--baseline-src",
        type=Path,
        default=None,
        help="a source tree (a checkout of another commit) whose gateway runs the same cases",
    )
    keyed.add_argument("--workers", type=int, default=1, help="gateway worker processes")
    keyed.add_argument("--plot", type=Path, default=None, help="PNG: CPU per message, p99")
    keyed.add_argument("--default-offset", choices=["historical", "live"], default=None)
    keyed.add_argument(
        "--rss-every", type=float, default=0.0, help="sample the gateway's RSS every S s (soak)"
    )
    keyed.add_argument(
        "--history",
        type=int,
        default=0,
        help="messages produced before the streams open: each opens over a full cache",
    )
    keyed.add_argument(
        "--h2-streams",
        type=int,
        default=0,
        help="streams per HTTP/2 connection (h2c, prior knowledge); 0: HTTP/1.1, one each",
    )
    keyed.add_argument(
        "--warmup",
        type=float,
        default=15.0,
        help="seconds of messages no stream wants before the measured window (0: none)",
    )
    keyed.add_argument(
        "--filter", choices=["key", "header", "extracted"], default="key",
        help="what each stream filters on: the Kafka key, a header carrying it, or a header the"
        " cache server extracts from a field of the value (topics[].transforms)",
    )  # fmt: skip
    keyed.add_argument(
        "--trace-sampling", type=float, default=None,
        help="share of records whose delivery traces the gateway sends (otlp exporter, traces"
        ".sampling) to a collector started for the run; unset: no traces exporter",
    )  # fmt: skip
    keyed.add_argument(
        "--loop-lag", type=writable_directory, default=None, metavar="DIR",
        help="every gateway process writes its event loop's slow moments and their stacks to"
        " DIR/<pid>.jsonl; each case keeps per worker those over 50 ms in its measured window",
    )  # fmt: skip
    keyed.add_argument("--out", type=Path, default=None)
    keyed.set_defaults(func=_keyed)

    stalled = scenarios.add_parser(
        "stalled",
        help="N clients that never read a busy Kafka stream: live p99, their end, gateway RSS",
    )
    stalled.add_argument("--stalled", type=int, default=1000, help="clients that never read")
    stalled.add_argument("--rate", type=float, default=400.0, help="messages/s produced")
    stalled.add_argument("--live", type=int, default=20, help="live readers")
    stalled.add_argument(
        "--duration", type=float, default=30.0, help="seconds of the baseline and after phases"
    )
    stalled.add_argument("--size", type=int, default=100, help="bytes of each message value")
    stalled.add_argument(
        "--warmup", type=float, default=60.0, help="seconds before the baseline (RSS levels off)"
    )
    stalled.add_argument(
        "--slow-client-timeout", type=float, default=10.0, help="the sse server's option"
    )
    stalled.add_argument(
        "--after", type=float, default=None,
        help="seconds of the after phase, RSS recorded every 10 s (default: --duration)",
    )  # fmt: skip
    stalled.add_argument(
        "--history", type=int, default=0,
        help="messages of history the stalled clients replay (historical topic; 0: live head)",
    )  # fmt: skip
    stalled.add_argument(
        "--cache-max-age", type=float, default=5.0,
        help="seconds the cache keeps a record (without --history): how long a stalled client's"
        " place is held before it counts as behind",
    )  # fmt: skip
    stalled.add_argument("--repeat", type=int, default=3, help="runs; medians kept")
    stalled.add_argument("--out", type=Path, default=None)
    stalled.set_defaults(func=_stalled)

    failover = scenarios.add_parser(
        "failover",
        help="Kafka leaders killed under N SSE clients on a 3-node cluster: gap, lost, duplicated",
    )
    failover.add_argument("--clients", type=int, default=1000, help="streams")
    failover.add_argument(
        "--unfiltered", type=float, default=0.1, help="share of the streams on /events (0.1)"
    )
    failover.add_argument("--rate", type=float, default=200.0, help="messages/s produced")
    failover.add_argument("--keys", type=int, default=100, help="keys the filtered streams use")
    failover.add_argument("--repeat", type=int, default=3, help="cases, each killing two nodes")
    failover.add_argument("--warmup", type=float, default=5.0, help="seconds before the first kill")
    failover.add_argument("--hold", type=float, default=5.0, help="seconds after writes resume")
    failover.add_argument("--workers", type=int, default=1, help="gateway worker processes")
    failover.add_argument("--heap", default="512m", help="JVM heap per Kafka node")
    failover.add_argument("--out", type=Path, default=None)
    failover.set_defaults(func=_failover)

    pipeline = scenarios.add_parser(
        "pipeline",
        help="records/s through the Spark pipeline, and latency to the sink and to an SSE client",
    )
    pipeline.add_argument("--records", type=int, default=1_000_000, help="raw records produced")
    pipeline.add_argument("--runs", type=int, default=3, help="runs per case; the median is kept")
    pipeline.add_argument("--latency-seconds", type=float, default=10.0)
    pipeline.add_argument("--latency-rate", type=int, default=1000, help="records/s produced")
    pipeline.add_argument("--master", default="local[2]")
    pipeline.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting"
    )
    pipeline.add_argument(
        "--source-option", action="append", default=[], metavar="KEY=VALUE",
        help="a Kafka source option, e.g. maxOffsetsPerTrigger=100000",
    )  # fmt: skip
    pipeline.add_argument(
        "--validation", default="python,jvm", metavar="LIST",
        help="where records are checked, comma-separated: python (the model), jvm",
    )  # fmt: skip
    pipeline.add_argument("--cases", default="stateless,windowed", metavar="LIST")
    pipeline.add_argument(
        "--latency-triggers", default=None, metavar="LIST",
        help="triggers of the latency cases, comma-separated, as in a pipeline file (default:"
        " 0 seconds,100 milliseconds,real-time 5 seconds,continuous 1 second)",
    )  # fmt: skip
    pipeline.add_argument("--out", type=Path, default=None)
    pipeline.set_defaults(func=_pipeline)

    for parser in scenarios.choices.values():
        parser.set_defaults(func=_recorded(parser.get_default("func")))


def _recorded(command: Command) -> Command:
    """``command``, with what its result files record of its start taken first
    (``args.provenance``)."""

    def run(args: argparse.Namespace) -> int:
        args.provenance = started()
        return command(args)

    return run


def _names(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _int_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        message = f"{text!r} is not a comma-separated list of integers"
        raise argparse.ArgumentTypeError(message) from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: every value must be a positive integer")
    return values


def _counts_or_none(text: str) -> list[int]:
    return [] if text.strip().lower() == "none" else _int_list(text)


def _protocols(text: str) -> tuple[str, ...]:
    values = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [v for v in values if v not in ("h1", "h2")]
    if not values or unknown:
        raise argparse.ArgumentTypeError(f"{text!r}: protocols are h1 and h2")
    return values


def _static(args: argparse.Namespace) -> int:
    from ssegate_lab.bench.foundation import run_static

    return _write(run_static(args.duration, args.connections, args.workers, args.runs), args)


def _idle(args: argparse.Namespace) -> int:
    from ssegate_lab.bench.idle import run_idle
    from ssegate_lab.bench.idle_plan import PlanError

    try:
        results = run_idle(
            args.connections,
            tls_count=args.tls_connections,
            runs=args.runs,
            gateway_workers=args.workers,
            client_processes=args.client_processes,
        )
    except PlanError as exc:
        raise SystemExit(f"ssegate: bench idle: {exc}") from None
    return _write(results, args)


def _proxy(args: argparse.Namespace) -> int:
    from ssegate_lab.bench.proxy import plot_latency, run_proxy

    results = run_proxy(
        args.clients,
        [float(rate) for rate in args.rate],
        duration=args.duration,
        protocols=args.protocol,
        workers=args.workers,
        tls=args.tls,
        client_processes=args.client_processes,
        h2_streams=args.h2_streams,
        size=args.size,
        h2_client=args.h2_client,
    )
    if args.plot is not None:
        results["plot"] = plot_latency(results, args.plot)
    return _write(results, args)


def _proxy_idle(args: argparse.Namespace) -> int:
    from ssegate_lab.bench.proxy import run_proxy_idle

    return _write(run_proxy_idle(args.clients, protocol=args.protocol, tls=args.tls), args)


def _fanout_transports(text: str) -> tuple[str, ...]:
    values = tuple(part.strip() for part in text.split(",") if part.strip())
    if not values or any(v not in ("h1", "tls-h1", "tls-h2") for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: transports are h1, tls-h1 and tls-h2")
    return values


def _fanout(args: argparse.Namespace) -> int:
    from ssegate_lab.bench.fanout import run_fanout
    from ssegate_lab.bench.fanout_report import plot_fanout

    results = run_fanout(
        args.clients,
        [float(rate) for rate in args.rate],
        duration=args.duration,
        transports=args.transports,
        idle_clients=args.idle_clients,
        ladder_clients=args.ladder_clients,
        ladder_rates=None if args.ladder_rates is None else [float(r) for r in args.ladder_rates],
        ladder_duration=args.ladder_duration,
        ladder_budget=args.ladder_budget,
        ladder_transport=args.ladder_transport,
        mercure=not args.without_mercure,
        mercure_transport=args.mercure_transport,
        client_processes=args.client_processes,
        workers=args.workers,
        h2_client=args.h2_client,
        mercure_publish_cost=args.mercure_publish_cost,
    )
    if args.plot is not None:
        results["plot"] = plot_fanout(results, args.plot)
    return _write(results, args)


def _jwt(args: argparse.Namespace) -> int:
    from ssegate_lab.bench.jwt import run_jwt, run_verify

    if args.verify_only:
        return _write(run_verify(args.count, args.runs), args)

    results = run_jwt(
        args.clients, tls=args.tls, key_type=args.key_type, concurrency=args.concurrency
    )
    return _write(results, args)


def _kafka(args: argparse.Namespace) -> int:
    from ssegate_lab.bench.kafka import run_kafka

    results = run_kafka(
        args.clients,
        [float(rate) for rate in args.rate],
        duration=args.duration,
        idle_clients=args.idle_clients,
        kafkasse_clients=args.kafkasse_clients,
        model=args.model,
        workers=args.workers,
    )
    return _write(results, args)


def _keyed(args: argparse.Namespace) -> int:
    from ssegate_lab.bench.keyed import plot_keyed, run_keyed

    results = run_keyed(
        args.streams,
        rate=args.rate,
        duration=args.duration,
        keys=args.keys,
        partitions=args.partitions,
        repeat=args.repeat,
        baseline_src=args.baseline_src,
        workers=args.workers,
        default_offset=args.default_offset,
        rss_every=args.rss_every,
        history=args.history,
        h2_streams=args.h2_streams,
        warmup=args.warmup,
        filter_mode=args.filter,
        trace_sampling=args.trace_sampling,
        loop_lag_dir=args.loop_lag,
        progress=None if args.out is None else lambda partial: _save(partial, args),
    )
    if args.plot is not None:
        results["plot"] = plot_keyed(results, args.plot)
    return _write(results, args)


def _stalled(args: argparse.Namespace) -> int:
    from ssegate_lab.bench.stalled import run_stalled

    results = run_stalled(
        args.stalled,
        rate=args.rate,
        live=args.live,
        duration=args.duration,
        size=args.size,
        repeat=args.repeat,
        warmup=args.warmup,
        slow_client_timeout=args.slow_client_timeout,
        after=args.after,
        history=args.history,
        cache_max_age=args.cache_max_age,
        progress=None if args.out is None else lambda partial: _save(partial, args),
    )
    names = ("stalled", "rate", "live", "duration", "size", "warmup", "repeat", "after", "history",
             "cache_max_age")  # fmt: skip
    results["command"] = "ssegate bench stalled " + " ".join(
        f"--{name.replace('_', '-')} {getattr(args, name)}"
        for name in names
        if getattr(args, name) is not None
    )
    return _write(results, args)


def _failover(args: argparse.Namespace) -> int:
    from ssegate_lab.bench.failover import Workload, run_failover

    try:
        load = Workload(args.clients, args.unfiltered, args.rate, args.keys, args.warmup,
                        args.hold, workers=args.workers)  # fmt: skip
    except ValueError as exc:
        raise SystemExit(f"ssegate: bench failover: {exc}") from None
    if args.repeat < 1:
        raise SystemExit("ssegate: bench failover: --repeat must be at least 1")
    return _write(run_failover(load, repeat=args.repeat, heap=args.heap), args)


def _pipeline(args: argparse.Namespace) -> int:
    from ssegate_lab.bench.pipeline import LATENCY_TRIGGERS, run

    def pairs(items: list[str]) -> dict[str, str]:
        return dict(item.split("=", 1) for item in items if "=" in item)

    triggers = _names(args.latency_triggers) if args.latency_triggers else LATENCY_TRIGGERS
    results = run(
        args.records,
        args.runs,
        latency_seconds=args.latency_seconds,
        latency_rate=args.latency_rate,
        master=args.master,
        conf=pairs(args.conf),
        source_options=pairs(args.source_option),
        cases=_names(args.cases),
        validations=_names(args.validation),
        triggers=triggers,
    )
    return _write(results, args)


def _without_histograms(value: Any) -> Any:
    """The results as printed: histograms stay in the file only."""
    if isinstance(value, dict):
        return {k: _without_histograms(v) for k, v in value.items() if k != "histogram_us"}
    if isinstance(value, list):
        return [_without_histograms(v) for v in value]
    return value


def _save(partial: dict[str, Any], args: argparse.Namespace) -> None:
    """What a long scenario has measured so far, beside where its result will go."""
    write(partial, args.out.with_name(args.out.name + ".partial"), args.provenance, partial=True)


def _write(results: dict[str, Any], args: argparse.Namespace) -> int:
    out = write(results, args.out or default_path(results["scenario"]), args.provenance)
    print(json.dumps(_without_histograms(results), indent=2))
    print(f"written to {out}")
    return 0

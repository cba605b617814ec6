"""``ssegate pipeline check|run``: check a pipeline file, or run it on Spark until stopped.

``run`` starts every query of the pipeline and waits; SIGINT or SIGTERM stops the queries
(each at a micro-batch boundary, its checkpoint intact), then the Spark session, and exits 0. A
query that fails ends the run with status 1 and one line naming it. ``--available-now``
processes what the sources hold and exits, which is what a scheduled batch-style run wants.

With ``--trigger``, a stop waits for each query's pause between two micro-batches
(:func:`stop_between_batches`), so nothing is cancelled and Spark logs no aborted task.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from ssegate.pipeline.config import load_pipeline
from ssegate.telemetry.log import error, event

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery


def add_pipeline_parser(commands: Any) -> None:
    pipeline = commands.add_parser(
        "pipeline",
        help="run a Spark pipeline that feeds Kafka topics",
        description="Validate, transform and aggregate raw records into Kafka topics with Spark"
        " Structured Streaming and its Kafka connector.",
    )
    actions = pipeline.add_subparsers(title="commands", metavar="COMMAND", required=True)
    check = actions.add_parser("check", help="check a pipeline file and exit (no Spark)")
    check.add_argument("-c", "--config", required=True, type=Path, metavar="FILE")
    check.set_defaults(func=_check)
    run = actions.add_parser("run", help="run a pipeline until SIGINT or SIGTERM")
    run.add_argument("-c", "--config", required=True, type=Path, metavar="FILE")
    run.add_argument(
        "--master",
        default="local[2]",
        help="Spark master URL: local[N], spark://host:7077, yarn, k8s://...",
    )
    run.add_argument("--bootstrap", metavar="HOST:PORT", help="Kafka, instead of the file's")
    run.add_argument("--checkpoint", type=Path, metavar="DIR", help="instead of the file's")
    run.add_argument(
        "--trigger",
        type=float,
        metavar="SECONDS",
        help="one micro-batch every SECONDS for every query (default: the file's trigger)",
    )
    run.add_argument(
        "--available-now", action="store_true", help="process what the sources hold now, then exit"
    )
    run.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting (repeatable)",
    )
    run.set_defaults(func=_run)


def _check(args: argparse.Namespace) -> int:
    pipeline = load_pipeline(args.config)
    print(f"{args.config}: valid ({len(pipeline.sources)} sources, {len(pipeline.sinks)} sinks)")
    return 0


def _run(args: argparse.Namespace) -> int:
    from pyspark.errors import PySparkException

    from ssegate.pipeline.job import Trigger, batch_interval, start_pipeline
    from ssegate.pipeline.progress import CHECK_SECONDS, LateRows
    from ssegate.pipeline.session import spark_session

    pipeline = load_pipeline(args.config)
    conf = dict(item.split("=", 1) for item in args.conf if "=" in item)
    spark = spark_session(args.master, f"ssegate-pipeline-{pipeline.name}", conf)
    trigger: Trigger = "available_now" if args.available_now else args.trigger
    queries = start_pipeline(
        spark, pipeline, bootstrap=args.bootstrap, checkpoint=args.checkpoint, trigger=trigger
    )
    for query in queries:
        print(f"ssegate: pipeline query {query.name} started", flush=True)
    stopping = threading.Event()
    status = 1

    def stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    late = LateRows()
    check_at = time.monotonic() + CHECK_SECONDS
    try:
        while not stopping.is_set() and any(q.isActive for q in queries):
            stopping.wait(0.5)
            if time.monotonic() >= check_at:
                late.check(queries)
                check_at = time.monotonic() + CHECK_SECONDS
        status = 0
        for query in queries:
            failure = query.exception() if not query.isActive else None
            if failure is not None:
                error("pipeline.query.failed", query=query.name, reason=str(failure)[:500])
                print(
                    f"ssegate: pipeline query {query.name} failed: {str(failure).splitlines()[0]}",
                    file=sys.stderr,
                )
                status = 1
    except PySparkException as exc:
        print(f"ssegate: pipeline failed: {str(exc).splitlines()[0]}", file=sys.stderr)
        status = 1
    finally:
        print(f"ssegate: pipeline {pipeline.name} stopping", flush=True)
        stop_between_batches(queries, batch_interval(pipeline, trigger))
        late.check(queries)
        late.log_totals()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        event("pipeline.stopped", pipeline=pipeline.name, status=status)
        spark.stop()
        print(f"ssegate: pipeline {pipeline.name} stopped", flush=True)
    return status


def stop_between_batches(
    queries: Sequence[StreamingQuery], interval: float | None, timeout: float = 30.0
) -> None:
    """Stop each query while it waits for its next micro-batch, so that none is cancelled.

    With a trigger ``interval``, Spark starts micro-batches at the multiples of it on the wall
    clock. A query seen waiting twice, 50 ms apart, with more than a quarter of the interval (or
    0.3 s, if less) left before the next multiple, is stopped then: only its wait is interrupted.
    Stopping a query in the middle of a micro-batch cancels its tasks, which Spark logs as
    errors with stack traces. Back to back (no interval) there is no pause to wait for, so the
    queries are stopped at once, as are those still busy ``timeout`` seconds into the stop.
    """
    deadline = time.monotonic() + (timeout if interval else 0.0)
    margin = min(0.3, interval / 4) if interval else 0.0
    for query in queries:
        while query.isActive and time.monotonic() < deadline:
            if _waiting(query, interval or 1.0, margin):
                time.sleep(0.05)
                if _waiting(query, interval or 1.0, margin):
                    break
            time.sleep(0.02)
        if query.isActive:
            query.stop()


def _waiting(query: StreamingQuery, interval: float, margin: float) -> bool:
    """Whether ``query`` is between micro-batches with more than ``margin`` s to the next."""
    left = interval - time.time() % interval
    return left > margin and not query.status["isTriggerActive"]

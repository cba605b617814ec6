"""What skipping repeats costs the fetch thread per record: a micro-benchmark.

``python lab/src/ssegate_lab/bench/repeat_cost.py`` feeds the fetch thread's batch step
(:meth:`ssegate.bindings.kafka.fetch_records.RecordBatches.batch`, which turns librdkafka records
into the messages handed to the loop) batches of ``confluent_kafka.Message`` values, with no
broker, once without a repeat horizon and once with the default one, alternating, for records
without headers, with one ``tenant`` header, and with ``tenant`` and ``ssegate-id``. It prints
nanoseconds per record (the median batch of a run, the best run) and what the horizon adds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from confluent_kafka import Message

from ssegate.bindings.kafka.client import KafkaClient
from ssegate.bindings.kafka.fetcher import FetchThread
from ssegate.bindings.kafka.repeats import DEFAULT_HORIZON
from ssegate.kafka.topics import RECORD_ID_HEADER

KINDS = ("without headers", "tenant header", "tenant and id headers")
VALUE = b'{"temperature": 21.5, "humidity": 40}'


def records(kind: str, first: int, count: int) -> list[Message]:
    made = []
    for offset in range(first, first + count):
        headers: list[tuple[str, str | bytes | None]] | None = None
        if kind != KINDS[0]:
            headers = [("tenant", b"acme")]
        if kind == KINDS[2]:
            headers = [("tenant", b"acme"), (RECORD_ID_HEADER, b"copy@raw/0/%d" % offset)]
        key = b"d%03d" % (offset % 12)
        made.append(Message(topic="t", partition=0, offset=offset, key=key, value=VALUE,
                            headers=headers, timestamp=(1, 1_700_000_000_000)))  # fmt: skip
    return made


def ns_per_record(horizon: int, batches: list[list[Message]]) -> float:
    thread = FetchThread(KafkaClient("bench", ("127.0.0.1:9",)), lambda events: None, {},
                         repeat_horizon=horizon).records  # fmt: skip
    thread.reading_from(False, "t", 0, 0, 0)
    times = []
    for batch in batches:
        started = time.perf_counter()
        thread.batch("t", 0, batch, False)
        times.append(time.perf_counter() - started)
    return statistics.median(times[5:]) / len(batches[0]) * 1e9


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=5000, help="records per batch")
    parser.add_argument("--batches", type=int, default=40, help="batches per run")
    parser.add_argument("--runs", type=int, default=7, help="runs of each case, best kept")
    args = parser.parse_args(argv)
    print(f"{'records':24} {'horizon 0':>10} {f'horizon {DEFAULT_HORIZON}':>14} {'added':>8}")
    for kind in KINDS:
        batches = [records(kind, n * args.batch, args.batch) for n in range(args.batches)]
        without, with_horizon = [], []
        for _ in range(args.runs):
            without.append(ns_per_record(0, batches))
            with_horizon.append(ns_per_record(DEFAULT_HORIZON, batches))
        off, on = min(without), min(with_horizon)
        print(f"{kind:24} {off:8.0f}ns {on:12.0f}ns {on - off:+6.0f}ns")
    return 0


if __name__ == "__main__":
    sys.exit(main())

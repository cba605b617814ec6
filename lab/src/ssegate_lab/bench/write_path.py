"""The fan-out write path alone: what one live event costs the gateway per subscriber.

``python lab/src/ssegate_lab/bench/write_path.py`` builds, in one process, the gateway's own objects
from the topic feed down to the sockets (the Kafka cache's
:class:`~ssegate.bindings.kafka.topic_feed.TopicFeed`, the sse-kafka proxy, the sse server, the
HTTP/1.1 connections on 127.0.0.1) and hands the feed one-message batches by hand, as the fetch
thread would at a rate below one message per linger. A second process holds the subscribers'
connections and reads them as fast as it can (epoll, ``recv``). There is no broker and no
producer, so nothing but the fan-out is measured. Per subscriber count it reports:

- ``cpu_us_per_delivery``: the gateway process's CPU time (user + system: the sends'
  kernel work included) over the batches, divided by the deliveries;
- ``fanout_ms``: wall time of each batch's fan-out, from the feed being handed the batch to
  the last subscriber's bytes being in the kernel (p50 and max over the batches): how long the
  last subscriber's event waited in the gateway;
- ``backend``: the fan-out's :data:`ssegate.native.fanout.BACKEND` (``none`` for code that
  writes each stream alone).

``--baseline-src DIR`` measures another checkout's code too (its ``src``), alternating with
this one's, each case run in a fresh process with that code first on the path; ``--repeat``
runs each pair that many times and the summary keeps medians. The harness only uses what both
have (feed, proxy, sse server, http connection), so it can measure code older than itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import multiprocessing.connection
import os
import select
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ssegate_lab.bench.load import raise_open_files
from ssegate_lab.bench.result_file import started, write

TOPIC = "events"
SETTLE_SECONDS = 0.5
WARM_UP_BATCHES = 5


def _client(port: int, count: int, ready: Any, stop: Any) -> None:
    """The subscribers: ``count`` connections that send their request, then read all they get."""
    raise_open_files(count + 100)
    poller = select.epoll()
    held: dict[int, socket.socket] = {}
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(f"GET /{TOPIC} HTTP/1.1\r\nhost: bench\r\n\r\n".encode())
        sock.setblocking(False)
        poller.register(sock.fileno(), select.EPOLLIN)
        held[sock.fileno()] = sock
    ready.set()
    while not stop.is_set():
        for fd, _ in poller.poll(0.1):
            try:
                while held[fd].recv(65536):
                    pass
            except (BlockingIOError, ConnectionError):
                pass
    for sock in held.values():
        sock.close()


class _FeedSource:
    """A topic source over one in-process feed (what the kafka cache client hands out)."""

    def __init__(self, feed: Any) -> None:
        self.feed = feed

    def subscribe(
        self, topic: str, start: Mapping[int, int], listener: Any, *, default: Any = None
    ) -> Any:
        return self.feed.subscribe(listener, start, default or "live")

    def holds(self, topic: str, start: Mapping[int, int]) -> bool:
        return bool(self.feed.holds(start))

    def value_text(self, topic: str) -> None:
        return None


async def _serve(subscribers: int, batches: int, interval: float) -> dict[str, Any]:
    from ssegate.bindings.http.connection import HttpConnectionProtocol
    from ssegate.bindings.kafka.fetch_events import Fetched
    from ssegate.bindings.kafka.topic_feed import FeedHooks, TopicFeed
    from ssegate.bindings.sse.server import SseRoute, SseServer
    from ssegate.bindings.sse_kafka.proxy import SseKafkaProxy, compile_route
    from ssegate.config.model import Route
    from ssegate.kafka.topics import KafkaMessage
    from ssegate.telemetry.metrics import Metrics

    raise_open_files(subscribers + 100)
    loop = asyncio.get_running_loop()
    nothing: Callable[..., None] = lambda *args: None  # noqa: E731

    def schedule(callback: Callable[[], None]) -> None:
        loop.call_soon(callback)

    hooks = FeedHooks(schedule, nothing, nothing, time.monotonic, nothing, nothing)
    feed = TopicFeed(TOPIC, hooks, max_bytes=64 << 20, max_age=600.0)
    feed.on_started({0: 0}, {0: 0}, False)
    metrics = Metrics()
    config = Route(exit="cache", when=[{"path": "/{topic}"}], path="route")
    proxy = SseKafkaProxy("fanout", [compile_route(config, _FeedSource(feed), "route")], metrics)
    sse = SseServer("sse", [SseRoute(None, proxy)], metrics, keepalive=0, slow_client_timeout=0)
    server = await loop.create_server(
        lambda: HttpConnectionProtocol(sse.handle), "127.0.0.1", 0, backlog=4096
    )
    port = server.sockets[0].getsockname()[1]
    context = multiprocessing.get_context("spawn")
    ready, stop = context.Event(), context.Event()
    client = context.Process(target=_client, args=(port, subscribers, ready, stop))
    client.start()
    deadline = time.monotonic() + 120
    while not ready.is_set() or metrics.counter("stream.opens.sent", "sse") < subscribers:
        if time.monotonic() > deadline or not client.is_alive():
            raise RuntimeError("the subscribers did not all connect")
        await asyncio.sleep(0.05)
    await asyncio.sleep(SETTLE_SECONDS)
    offset = 0

    def batch() -> Any:
        nonlocal offset
        value = b'{"t":%d,"n":%d}' % (time.monotonic_ns(), offset)
        message = KafkaMessage(TOPIC, 0, offset, None, value, ())
        offset += 1
        return Fetched(TOPIC, 0, [message], offset)

    for _ in range(WARM_UP_BATCHES):
        feed.on_fetched(batch())
        await asyncio.sleep(interval)
    cpu = 0.0
    walls: list[float] = []
    for _ in range(batches):
        fetched = batch()
        cpu_before, wall_before = time.process_time(), time.perf_counter()
        feed.on_fetched(fetched)
        walls.append(time.perf_counter() - wall_before)
        cpu += time.process_time() - cpu_before
        await asyncio.sleep(interval)
    stop.set()
    client.join(30)
    server.close()
    backend = "none"
    try:
        from ssegate.native import fanout

        backend = str(fanout.BACKEND)
    except ImportError:
        pass
    deliveries = subscribers * batches
    return {
        "subscribers": subscribers,
        "batches": batches,
        "backend": backend,
        "cpu_us_per_delivery": round(cpu / deliveries * 1e6, 2),
        "fanout_ms": {
            "p50": round(statistics.median(walls) * 1e3, 2),
            "max": round(max(walls) * 1e3, 2),
        },
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


def serve(subscribers: int, batches: int, interval: float) -> dict[str, Any]:
    """One case in this process, with whatever ``ssegate`` it imports."""
    import uvloop

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(_serve(subscribers, batches, interval))


def _case(src: Path, subscribers: int, batches: int, interval: float) -> dict[str, Any]:
    """One case in a fresh process with ``src`` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    args = [sys.executable, __file__, "--serve", str(subscribers)]
    args += ["--batches", str(batches), "--interval", str(interval)]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        return {"subscribers": subscribers, "error": done.stderr.strip()[-500:]}
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def run_write_path(
    subscribers: list[int],
    *,
    batches: int = 30,
    interval: float = 1 / 30,
    repeat: int = 3,
    baseline_src: Path | None = None,
) -> dict[str, Any]:
    """Every subscriber count ``repeat`` times, alternating the baseline's code and this one's."""
    own = Path(__file__).resolve().parents[2]
    variants = {"this": own, **({"baseline": baseline_src} if baseline_src else {})}
    runs: list[dict[str, Any]] = []
    for _ in range(repeat):
        for count in subscribers:
            for name in reversed(variants):
                runs.append({"code": name, **_case(variants[name], count, batches, interval)})
    summary = []
    for count in subscribers:
        for name in variants:
            mine = [r for r in runs if r["code"] == name and r["subscribers"] == count]
            done = [r for r in mine if "error" not in r]
            if not done:
                continue
            summary.append(
                {
                    "code": name,
                    "subscribers": count,
                    "backend": done[0]["backend"],
                    "cpu_us_per_delivery": statistics.median(
                        r["cpu_us_per_delivery"] for r in done
                    ),
                    "fanout_ms_p50": statistics.median(r["fanout_ms"]["p50"] for r in done),
                    "fanout_ms_max": statistics.median(r["fanout_ms"]["max"] for r in done),
                    "load_average_1min": [r["load_average_1min"] for r in done],
                    "runs": len(done),
                }
            )
    return {
        "scenario": "write-path",
        "batches": batches,
        "interval_s": interval,
        "repeat": repeat,
        "runs": runs,
        "summary": summary,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscribers", default="100,1000,5000,10000")
    parser.add_argument("--batches", type=int, default=30, help="measured batches per case")
    parser.add_argument("--interval", type=float, default=1 / 30, help="seconds between batches")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline-src", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve is not None:
        print(json.dumps(serve(args.serve, args.batches, args.interval)))
        return 0
    start = started()
    counts = [int(part) for part in args.subscribers.split(",")]
    results = run_write_path(
        counts,
        batches=args.batches,
        interval=args.interval,
        repeat=args.repeat,
        baseline_src=args.baseline_src,
    )
    if args.out is not None:
        write(results, args.out, start)
    print(json.dumps(results["summary"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

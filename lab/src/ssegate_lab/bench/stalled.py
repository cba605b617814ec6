"""``ssegate bench stalled``: clients that never read a busy stream, and what they cost the rest.

A real broker and a real gateway (``sse-kafka``, one topic of one partition read at its live
head, ``defaultOffset: live``); a producer writes ``rate`` messages a second of ``size`` bytes,
``{"t":<monotonic_ns>,"n":<sequence>,"p":"xx…"}``, from before the first phase to after the
last. Two load processes, apart from the gateway (:mod:`ssegate_lab.bench.stalled_clients`): one
holds ``live`` readers of the stream for the whole run, the other, in the second phase, the
stalled clients. In one process, the loop that connects a thousand clients at once would read
the live readers' events late and count its own delay as the gateway's. Per run, on a fresh
topic and a fresh gateway:

0. **warm-up**: ``warmup`` seconds with only the live readers, measured in no phase;
1. **baseline**: ``duration`` seconds with only the live readers; the gateway's RSS at its end;
2. **stalled**: ``stalled`` clients connect (``SO_RCVBUF`` of ``rcvbuf`` bytes) and never read.
   The phase lasts until each has seen its connection end, or until :func:`end_bound` plus
   :data:`~ssegate_lab.bench.stalled_report.END_MARGIN` seconds have passed; then the gateway's
   ``ssegate.sse.slow_clients`` count is read from its Prometheus endpoint;
3. **after**: ``after`` seconds more once they are gone (``duration`` unless told); the
   gateway's RSS every :data:`RSS_AFTER_EVERY` seconds and at its end, which the RSS verdict
   takes.

Then the producer stops and, after a drain, each live reader's event ids are tallied against
every offset produced. Per phase: the live readers' latency (produce → receipt), and the CPU of
the gateway, of the load processes (together), of the producer (this process) and of everything
else on the machine, each as a share of one core. The cache server's cache is bounded
(``cache_max_bytes``, full within the first 15 s) and the baseline starts after the warm-up, so
that the RSS comparison measures what the stalled clients left behind, not the cache filling up.
A stalled client stops at its place in the stream; the sse server drops it once it has been
behind the cache's start for the slow-client timeout, so the cache also lets go of records
older than ``cache_max_age`` seconds (:data:`CACHE_MAX_AGE`), and a stalled client falls
behind that long after it stopped.
``repeat`` runs; the verdicts and the summary are :mod:`ssegate_lab.bench.stalled_report`'s.

With ``history`` (messages, 0: none) the stalled clients replay: the topic's ``defaultOffset``
is ``historical``, so a stream opened without a last event id starts from the oldest record the
cache holds; ``history`` messages are produced before the live readers open (they replay them in
the warm-up, and are live from then on), and the cache is bounded to about ``history`` messages
(:func:`history_cache_bytes`), so each stalled client is owed that much history when it
connects. The stalled phase then lasts at least :data:`ACCEPT_WINDOW` seconds, and a run records
how many of the stalled clients got their response head, and when (``accepted``).
"""

from __future__ import annotations

import json
import re
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ssegate.bindings.kafka.partition_cache import MESSAGE_OVERHEAD
from ssegate.engine.runtime import free_port
from ssegate_lab.bench.gateway import GatewayProcess, machine_busy_seconds, sample
from ssegate_lab.bench.held_streams import sse_request
from ssegate_lab.bench.kafka_rig import BenchBroker, new_producer, write_kafka_gateway_config
from ssegate_lab.bench.stalled_clients import StallLoad
from ssegate_lab.bench.stalled_report import (
    END_MARGIN,
    accepted,
    end_bound,
    ends,
    ratio,
    summarize,
    verdicts,
)
from ssegate_lab.broker import BrokerInfo

WARMUP_SECONDS = 60.0
"""After the live readers open and the producer starts, before the baseline: long enough for
the cache to fill and the gateway's RSS to level off (about a minute at 400 messages/s)."""
GONE_SECONDS = 1.0
"""After the last stalled client ended, before the stalled phase closes."""
DRAIN_SECONDS = 3.0
CACHE_MAX_BYTES = 2 * 1024 * 1024
CACHE_MAX_AGE = 5.0
"""Seconds the cache keeps a record in this scenario: how long it holds a stalled client's place
(without history) before that client counts as behind it."""
RSS_EVERY = 0.5
RSS_AFTER_EVERY = 10.0
"""How often the after phase records the gateway's RSS (memory may come back over time)."""
SLOW_CLIENTS = re.compile(r'^ssegate_sse_slow_clients_total\{[^}]*reason="(\w+)"[^}]*\} (\S+)$')
CACHE_BYTES = re.compile(r"^ssegate_kafka_cache_bytes\{[^}]*\} (\S+)$")
ACCEPT_WINDOW = 60.0
"""With history: the shortest stalled phase, over which the stalled clients' heads are counted."""
HISTORY_MESSAGE_BYTES = MESSAGE_OVERHEAD + 40
"""What the cache counts per message of history besides its value (the overhead it counts, the
record's key, headers and index entries, with some room)."""


def history_cache_bytes(history: int, size: int) -> int:
    """A cache bound that holds about ``history`` messages of ``size`` bytes."""
    return history * (size + HISTORY_MESSAGE_BYTES)


def run_stalled(
    stalled: int = 1000,
    *,
    rate: float = 400.0,
    live: int = 20,
    duration: float = 30.0,
    size: int = 100,
    repeat: int = 3,
    after: float | None = None,
    warmup: float = WARMUP_SECONDS,
    slow_client_timeout: float = 10.0,
    rcvbuf: int = 4096,
    cache_max_bytes: int | None = None,
    cache_max_age: float = CACHE_MAX_AGE,
    history: int = 0,
    broker_info: BrokerInfo | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """``repeat`` runs of the three phases; ``progress`` gets the results after every run.
    ``cache_max_bytes`` defaults to :data:`CACHE_MAX_BYTES`, or with ``history`` to
    :func:`history_cache_bytes`."""
    if cache_max_bytes is None:
        cache_max_bytes = history_cache_bytes(history, size) if history else CACHE_MAX_BYTES
    results: dict[str, Any] = {
        "scenario": "stalled",
        "stalled": stalled,
        "rate": rate,
        "live": live,
        "duration_s": duration,
        "after_s": duration if after is None else after,
        "warmup_s": warmup,
        "value_bytes": size,
        "repeat": repeat,
        "slow_client_timeout_s": slow_client_timeout,
        "rcvbuf": rcvbuf,
        "cache_max_bytes": cache_max_bytes,
        "cache_max_age_s": None if history else cache_max_age,
        "history": history,
        "default_offset": "historical" if history else "live",
        "runs": [],
    }
    with BenchBroker(broker_info) as broker, tempfile.TemporaryDirectory() as tmp:
        for _ in range(repeat):
            (topic,) = broker.create_topics("bench-stalled", 1, 1)
            metrics_port = free_port()
            ports = write_kafka_gateway_config(
                Path(tmp), broker.bootstrap, [topic], default_offset=results["default_offset"],
                sse_options={"slow-client-timeout": slow_client_timeout},
                metrics_port=metrics_port, cache_max_bytes=cache_max_bytes,
                cache_max_age=None if history else cache_max_age,
            )  # fmt: skip
            request = sse_request(f"/{topic}", ports.plain)
            with (
                GatewayProcess(ports.config) as gateway,
                StallLoad(ports.plain, request, files=live + 256) as readers,
                StallLoad(ports.plain, request, files=stalled + 256) as stallers,
            ):
                meter = _Meter(gateway.pid, (readers.pid, stallers.pid), broker.pid)
                rig = _Rig(gateway, readers, stallers, meter, metrics_port, broker.bootstrap,
                           topic, history, cache_max_age)  # fmt: skip
                run = rig.run(stalled, rate, live, duration, size, slow_client_timeout, rcvbuf,
                              warmup, results["after_s"])  # fmt: skip
            results["runs"].append(run)
            print(json.dumps(_brief(run)), flush=True)
            if progress is not None:
                progress(results)
    results["summary"] = summarize(results["runs"])
    return results


class _Producer(threading.Thread):
    """``rate`` messages a second of about ``size`` bytes each, until :meth:`stop`."""

    def __init__(self, bootstrap: str, topic: str, rate: float, size: int) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.rate = bootstrap, topic, rate
        self.pad = b"x" * max(0, size - len(b'{"t":0000000000000000000,"n":000000,"p":""}'))
        self.written = self.delivered = self.failed = 0
        """Messages handed to the producer (with one partition, the next one's offset)."""
        self._stop_event = threading.Event()

    def _delivered(self, error: object, message: object) -> None:
        if error is None:
            self.delivered += 1
        else:
            self.failed += 1

    def run(self) -> None:
        producer = new_producer(self.bootstrap)
        started = time.monotonic()
        while not self._stop_event.is_set():
            due = int(self.rate * (time.monotonic() - started)) + 1 - self.written
            for _ in range(due):
                value = b'{"t":%d,"n":%d,"p":"%s"}' % (time.monotonic_ns(), self.written, self.pad)
                try:
                    producer.produce(self.topic, value=value, on_delivery=self._delivered)
                except BufferError:
                    producer.poll(0.01)
                    producer.produce(self.topic, value=value, on_delivery=self._delivered)
                self.written += 1
            producer.poll(0)
            time.sleep(0.005)
        producer.flush(30)

    def stop(self) -> int:
        """Stop producing; how many messages the broker took."""
        self._stop_event.set()
        self.join(60)
        return self.delivered


@dataclass
class _Meter:
    """CPU seconds of the gateway, the load processes, this process (the producer), the broker
    and the whole machine."""

    gateway_pid: int
    load_pids: tuple[int, ...]
    broker_pid: int

    def mark(self) -> tuple[float, ...]:
        return (
            time.monotonic(),
            sample(self.gateway_pid).cpu_seconds,
            sum(sample(pid).cpu_seconds for pid in self.load_pids),
            _own_cpu_seconds(),
            sample(self.broker_pid).cpu_seconds,
            machine_busy_seconds(),
        )

    def shares(self, since: tuple[float, ...]) -> dict[str, float]:
        """Each one's CPU since ``since`` as a share of one core; ``other``: the rest of the
        machine (work that is not this benchmark's)."""
        now = self.mark()
        wall = max(1e-6, now[0] - since[0])
        gateway, load, own, broker, machine = (now[i] - since[i] for i in range(1, 6))
        other = machine - gateway - load - own - broker
        return {
            "seconds": round(wall, 2),
            "gateway_cpu_share": round(gateway / wall, 3),
            "load_cpu_share": round(load / wall, 3),
            "producer_cpu_share": round(own / wall, 3),
            "broker_cpu_share": round(broker / wall, 3),
            "other_cpu_share": round(max(0.0, other) / wall, 3),
        }


def _own_cpu_seconds() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class _RssPeak:
    """The gateway's highest RSS, sampled from a thread until :meth:`stop`."""

    def __init__(self, pid: int) -> None:
        self.peak = sample(pid).rss_bytes
        self._stop_event = threading.Event()

        def watch() -> None:
            while not self._stop_event.wait(RSS_EVERY):
                self.peak = max(self.peak, sample(pid).rss_bytes)

        self._thread = threading.Thread(target=watch, daemon=True)
        self._thread.start()

    def stop(self) -> int:
        self._stop_event.set()
        self._thread.join(5)
        return self.peak


@dataclass
class _Rig:
    gateway: GatewayProcess
    readers: StallLoad
    """The live readers' process."""
    stallers: StallLoad
    """The stalled clients' process."""
    meter: _Meter
    metrics_port: int
    bootstrap: str
    topic: str
    history: int
    cache_max_age: float

    def _phase(self, mark: tuple[float, ...]) -> dict[str, Any]:
        """What the live readers got since ``mark``, the CPU shares, and the gateway's full
        collections in that window (each stopped a worker's loop for its pause)."""
        return {
            **self.readers.report(),
            **self.meter.shares(mark),
            **self.gateway.collections_in(mark[0], time.monotonic()),
        }

    def run(
        self, stalled: int, rate: float, live: int, duration: float, size: int,
        timeout: float, rcvbuf: int, warmup: float, after_seconds: float,
    ) -> dict[str, Any]:  # fmt: skip
        load, gateway, meter = self.readers, self.gateway, self.meter
        if self.history:
            _produce_history(self.bootstrap, self.topic, self.history, size)
        opened = load.open_live(live)
        producer = _Producer(self.bootstrap, self.topic, rate, size)
        producer.start()
        try:
            time.sleep(warmup)
            load.report()  # what came while warming up counts in no phase
            # every offset from here on is owed to every reader (the history's come first)
            owed_from = self.history + producer.written
            rss_start = gateway.sample().rss_bytes
            mark = meter.mark()
            time.sleep(duration)
            baseline = self._phase(mark)
            rss_baseline = gateway.sample().rss_bytes
            stream_rate = baseline["bytes"] / max(1, opened["opened"]) / baseline["seconds"]

            cache_bytes = self._metric(CACHE_BYTES).get("", 0.0)
            peak = _RssPeak(gateway.pid)
            mark = meter.mark()
            connected = self.stallers.stall(stalled, rcvbuf)
            held_for = 0.0 if self.history else self.cache_max_age
            bound = end_bound(stream_rate, connected["rcvbuf_bytes"], timeout, held_for)
            within = bound + END_MARGIN
            if self.history:  # counted over the window from the first connect
                within = max(within, ACCEPT_WINDOW - (time.monotonic() - mark[0]))
            status = self._until_all_ended(within)
            time.sleep(GONE_SECONDS)
            during = self._phase(mark)
            slow = self._metric(SLOW_CLIENTS)
            slow["total"] = sum(slow.values())
            rss_peak = peak.stop()

            mark = meter.mark()
            rss_timeline = self._rss_every(after_seconds)
            after = self._phase(mark)
            rss_after = gateway.sample().rss_bytes
        finally:
            produced = producer.stop()
        time.sleep(DRAIN_SECONDS)
        tally = load.tally(owed_from, self.history + produced)
        run: dict[str, Any] = {
            "produced": produced,
            "owed_from_offset": owed_from,
            "produce_failures": producer.failed,
            "gateway_allocator": gateway.allocator(),
            "stream_bytes_per_s": round(stream_rate),
            "live": {"wanted": live, **opened, **tally},
            "connect": connected,
            "cache_bytes_at_stall": cache_bytes,
            "stalled_clients": ends(status["ended_s"], status["how"], bound),
            "accepted": accepted(status["head_s"], status["head_status"], status["head_at_s"]),
            "stalled_read_after_end_max": max(status["read_after_end"], default=0),
            "slow_clients_metric": slow,
            "phases": {"baseline": baseline, "stalled": during, "after": after},
            "rss_mib": {
                "baseline_start": _mib(rss_start),
                "baseline_end": _mib(rss_baseline),
                "peak": _mib(rss_peak),
                "after": _mib(rss_after),
                "after_timeline": rss_timeline,
            },
            "p99_ratio": ratio(during["latency_ms"]["p99"], baseline["latency_ms"]["p99"]),
            "rss_ratio": ratio(rss_after, rss_baseline),
        }
        run["verdicts"] = verdicts(run)
        return run

    def _rss_every(self, seconds: float) -> list[dict[str, float]]:
        """Sleep ``seconds``, recording the gateway's RSS (MiB) every :data:`RSS_AFTER_EVERY`."""
        started = time.monotonic()
        timeline = []
        while (left := started + seconds - time.monotonic()) > 0:
            time.sleep(min(RSS_AFTER_EVERY, left))
            elapsed = round(time.monotonic() - started, 1)
            timeline.append({"t": elapsed, "mib": _mib(self.gateway.sample().rss_bytes)})
        return timeline

    def _until_all_ended(self, within: float) -> dict[str, Any]:
        """The stalled clients' status once every one has ended, or ``within`` s from now."""
        deadline = time.monotonic() + within
        while True:
            status = self.stallers.status()
            if all(value is not None for value in status["ended_s"]):
                return status
            if time.monotonic() > deadline:
                return status
            time.sleep(0.5)

    def _metric(self, pattern: re.Pattern[str]) -> dict[str, float]:
        """The gateway's Prometheus lines ``pattern`` matches, summed by its first group when
        it has two (``ssegate.sse.slow_clients`` by reason), else under ``""``."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as answer:
            text = answer.read().decode()
        counts: dict[str, float] = {}
        for line in text.splitlines():
            found = pattern.match(line)
            if found:
                name = found[1] if pattern.groups > 1 else ""
                counts[name] = counts.get(name, 0.0) + float(found[pattern.groups])
        return counts


def _produce_history(bootstrap: str, topic: str, count: int, size: int) -> None:
    """``count`` messages of the bench's form, at once, before the run's producer starts."""
    producer = new_producer(bootstrap)
    pad = b"x" * max(0, size - len(b'{"t":0000000000000000000,"n":000000,"p":""}'))
    for n in range(count):
        value = b'{"t":%d,"n":%d,"p":"%s"}' % (time.monotonic_ns(), n, pad)
        while True:
            try:
                producer.produce(topic, value=value)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    producer.flush(60)


def _mib(size: int) -> float:
    return round(size / 2**20, 1)


def _brief(run: dict[str, Any]) -> dict[str, Any]:
    stalled = run["stalled_clients"]
    return {
        "p99_ms": {name: phase["latency_ms"]["p99"] for name, phase in run["phases"].items()},
        "p99_ratio": run["p99_ratio"],
        "ended": f"{stalled['ended']}/{stalled['connected']}",
        "accepted": run["accepted"],
        "end_s": stalled["end_s"],
        "bound_s": stalled["bound_s"],
        "rss_mib": run["rss_mib"],
        "verdicts": run["verdicts"],
    }

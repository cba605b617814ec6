"""h2load (nghttp2's C load client) holding the bulk of an h2 case's SSE streams.

A pure-Python h2 client spends its time in the ``h2`` library's frame handling, so at high
rates it, not the server, sets the figures of an h2 case. h2load does not have that limit, but
it cannot read SSE: it counts response bytes, not events, and its timings are per request
(connect, time to first byte), which for a stream that never ends say nothing of the latency
of an event. So an h2 case splits its streams (:func:`split`):

- :data:`LATENCY_STREAMS` streams are held by the Python h2 client of
  :mod:`ssegate_lab.bench.load`, which reads every event: publish-to-receive latency, duplicated
  and skipped ids, and the body bytes of its streams. Its load is a few streams, whatever the
  case's size, so it stays far from saturation;
- the rest are held by h2load (:class:`H2loadStreams`): ``-c`` connections of ``-m`` streams,
  timing-based (``-D``) so it never waits for a stream to end. It reports the streams it
  started, the statuses answered and the DATA bytes it read: the throughput and connection
  side of the case.

Every subscriber of a case is sent the same events, encoded the same way, so a complete stream
carries the same bytes on every stream: h2load's streams owe the bytes of one Python stream
times their number (:func:`h2load_delivery`). A case's h2load part is complete when exactly
those bytes arrived; its events are estimated from the bytes, at the Python streams' bytes per
event. h2load's CPU comes from its own resource usage (``os.wait4``); it runs one thread.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import IO, Any

LATENCY_STREAMS = 10
"""Streams of an h2 case held by the Python client, for latency and exact counts."""
THREADS = 1
EXIT_GRACE_SECONDS = 30.0
"""How long past its duration h2load may take to exit before it is killed."""
_NUMBERS = {
    "requests": re.compile(
        rb"requests: .*?(\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed"
    ),
    "statuses": re.compile(rb"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx"),
    "traffic": re.compile(rb"traffic: .*?\((\d+)\) total, .*?\((\d+)\) headers.*?\((\d+)\) data"),
}


def h2load_path() -> str | None:
    return shutil.which("h2load")


def split(clients: int, *, use_h2load: bool = True) -> tuple[int, int]:
    """(streams for the Python client, streams for h2load) of an h2 case of ``clients``."""
    if not use_h2load or clients <= LATENCY_STREAMS or h2load_path() is None:
        return clients, 0
    return LATENCY_STREAMS, clients - LATENCY_STREAMS


@dataclass(frozen=True, slots=True)
class H2loadReport:
    started: int
    """Streams (requests) h2load started."""
    answered_2xx: int
    refused: int
    """Streams answered 4xx or 5xx."""
    failed: int
    data_bytes: int
    total_bytes: int


def parse_report(output: bytes) -> H2loadReport:
    """The figures of h2load's closing report; ``ValueError`` when it has none."""
    found = {name: pattern.search(output) for name, pattern in _NUMBERS.items()}
    missing = [name for name, match in found.items() if match is None]
    if missing:
        tail = output.decode("latin-1", "replace").strip().splitlines()[-3:]
        raise ValueError(f"h2load wrote no {', '.join(missing)} line: {' | '.join(tail)}")
    requests, statuses, traffic = found["requests"], found["statuses"], found["traffic"]
    assert requests is not None and statuses is not None and traffic is not None
    return H2loadReport(
        started=int(requests[1]),
        answered_2xx=int(statuses[1]),
        refused=int(statuses[3]) + int(statuses[4]),
        failed=int(requests[4]),
        data_bytes=int(traffic[3]),
        total_bytes=int(traffic[1]),
    )


class H2loadStreams:
    """h2load holding ``streams`` SSE streams to ``url`` for ``seconds``; a context manager."""

    def __init__(self, url: str, streams: int, per_connection: int, seconds: float) -> None:
        self.url = url
        self.streams = streams
        self.per_connection = max(1, per_connection)
        self.connections = -(-streams // self.per_connection)
        self.seconds = seconds
        self._process: subprocess.Popen[bytes] | None = None
        self._output: IO[bytes] | None = None
        self.started_at = 0.0
        """``time.monotonic()`` when h2load was started."""

    @property
    def argv(self) -> list[str]:
        return [
            h2load_path() or "h2load",
            *("-c", str(self.connections), "-m", str(self.per_connection)),
            *("-t", str(THREADS), "-D", str(math.ceil(self.seconds))),
            *("-H", "accept: text/event-stream", "-H", "cache-control: no-cache"),
            self.url,
        ]

    def open_seconds(self) -> float:
        """How long to let its connections open before publishing."""
        return 1.0 + self.connections / 500

    def __enter__(self) -> H2loadStreams:
        self.started_at = time.monotonic()
        self._output = tempfile.TemporaryFile()
        self._process = subprocess.Popen(self.argv, stdout=self._output, stderr=subprocess.STDOUT)
        return self

    def finish(self) -> dict[str, Any]:
        """Wait for the end of its run; its figures, CPU seconds and wall seconds."""
        process, out = self._process, self._output
        assert process is not None and out is not None
        deadline = self.started_at + self.seconds + EXIT_GRACE_SECONDS
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                process.kill()
                pid, status, usage = os.wait4(process.pid, 0)
                break
            time.sleep(0.05)
        process.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - self.started_at
        out.seek(0)
        output = out.read()
        figures: dict[str, Any] = {
            "streams": self.streams,
            "connections": self.connections,
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
            "wall_s": round(wall, 2),
            "exit_code": process.returncode,
        }
        try:
            figures["report"] = parse_report(output)
        except ValueError as exc:
            figures["error"] = str(exc)
        return figures

    def __exit__(self, *exc: object) -> None:
        process = self._process
        if process is not None and process.returncode is None:
            process.kill()
            process.wait()
        if self._output is not None:
            self._output.close()


def h2load_delivery(
    figures: dict[str, Any], python_bytes: int, python_streams: int, python_events: int
) -> dict[str, Any]:
    """h2load's streams measured against what the Python streams read: owed bytes, events.

    ``python_*``: the body bytes, streams opened and events read (every one, once) by the
    Python client over the same case.

    In its timed mode (``-D``) h2load sends a new request on a connection whose stream ended,
    so it can answer more requests ``2xx`` than it was given streams: each answer beyond them
    is a stream that ended before the case did and was opened again (``reopened``), not a
    stream more. ``opened`` counts the streams asked for that were answered, never more.
    """
    report: H2loadReport | None = figures.get("report")
    out = {k: v for k, v in figures.items() if k != "report"}
    if report is None:
        return out | {"opened": 0, "reopened": 0, "complete": False, "events_estimated": 0}
    opened = min(report.answered_2xx, figures["streams"])
    per_stream = python_bytes / python_streams if python_streams else 0.0
    owed = round(per_stream * opened)
    per_event = python_bytes / python_events if python_events else 0.0
    events = round(report.data_bytes / per_event) if per_event else 0
    return out | {
        "started": report.started,
        "answered_2xx": report.answered_2xx,
        "opened": opened,
        "reopened": report.answered_2xx - opened,
        "refused": report.refused,
        "data_bytes": report.data_bytes,
        "data_bytes_owed": owed,
        "events_estimated": events,
        "complete": report.answered_2xx == figures["streams"]
        and python_streams > 0
        and python_bytes % python_streams == 0
        and report.data_bytes == owed,
    }

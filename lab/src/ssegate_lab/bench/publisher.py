"""The upstream side of the proxy benchmark: the example SSE server and a fixed-rate publisher.

:class:`UpstreamProcess` runs ``ssegate.tools.sse_server`` on uvloop in a child process (a
:class:`~ssegate_lab.bench.ready_process.ReadyProcess`, so its CPU and memory are its own and
can be read from ``/proc``). :func:`publish` connects to its publish port and writes one line
per event at a fixed rate for a fixed time; each line is the publisher's ``time.monotonic_ns()``
when the batch was written (plus optional padding), which the load clients subtract from their
own monotonic clock (one clock for the whole machine) to get publish-to-receive latency. Events
are written in batches every ``tick`` seconds, one ``write`` per batch, so high rates do not
cost a system call per event.
"""

from __future__ import annotations

import asyncio
import sys
import time
from dataclasses import dataclass

from ssegate.engine.runtime import free_port
from ssegate_lab.bench.ready_process import ReadyProcess

_UPSTREAM_MAIN = (
    "import asyncio, sys, uvloop\n"
    "asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())\n"
    "from ssegate.tools.sse_server import main\n"
    "raise SystemExit(main(sys.argv[1:]))\n"
)


class UpstreamProcess(ReadyProcess):
    """The example SSE server in a child process on free loopback ports."""

    def __init__(self, timeout: float = 20.0) -> None:
        self.http_port = free_port()
        self.publish_port = free_port()
        argv = [sys.executable, "-c", _UPSTREAM_MAIN, "--http-port", str(self.http_port)]
        argv += ["--publish-port", str(self.publish_port)]
        super().__init__(argv, "sse server:", "upstream", timeout)


@dataclass(frozen=True, slots=True)
class Published:
    events: int
    started_ns: int
    ended_ns: int
    batches: int


async def publish(
    port: int, rate: float, duration: float, *, size: int = 0, tick: float = 0.005
) -> Published:
    """Write ``rate`` events/s for ``duration`` s to the publish port; what was written."""
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_connection(asyncio.Protocol, "127.0.0.1", port)
    writer = transport
    padding = b" " + b"x" * (size - 1) if size > 0 else b""
    total = max(0, round(rate * duration))
    written = batches = 0
    started = time.monotonic_ns()
    step = max(tick, 1.0 / rate) if rate > 0 else tick
    try:
        while written < total:
            elapsed = (time.monotonic_ns() - started) / 1e9
            due = min(total, int(rate * elapsed) + 1) - written
            if due > 0:
                stamp = b"%d%b\n" % (time.monotonic_ns(), padding)
                writer.write(stamp * due)
                written += due
                batches += 1
            await asyncio.sleep(step)
        ended = time.monotonic_ns()
    finally:
        writer.close()
    return Published(written, started, ended, batches)

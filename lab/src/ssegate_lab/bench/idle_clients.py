"""The client side of ``bench idle``: processes that open idle connections and hold them.

Each :class:`HoldSpec` is one spawned process (uvloop, :class:`asyncio.Protocol`): it raises
its open-file limit to its share, connects with bounded concurrency from its source
addresses until its share is open or its time is up, reports over a pipe, holds the
connections until told to close, then closes them with a reset (``SO_LINGER`` 0), so that
neither side keeps them in ``TIME_WAIT``.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import multiprocessing.connection
import socket
import ssl
import struct
import time
from dataclasses import dataclass
from typing import Any, cast

from ssegate_lab.bench.idle_plan import RESERVED_FILES
from ssegate_lab.bench.load import raise_open_files, stop_processes

IP_BIND_ADDRESS_NO_PORT = getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24)
"""Linux ``<linux/in.h>``: bind the address now, the port at connect."""
HOLD_SECONDS_MAX = 600.0
"""A client process lets its connections go by itself after this long."""


@dataclass(frozen=True, slots=True)
class HoldSpec:
    """One client process's share; plain data, so it crosses to a spawned process."""

    port: int
    count: int
    tls: bool
    sources: tuple[str, ...]
    in_flight: int
    open_seconds: float


class HoldingClients:
    """Spawned client processes, each opening and holding its :class:`HoldSpec`."""

    def __init__(self, specs: list[HoldSpec]) -> None:
        self._specs = specs
        self._pipes: list[multiprocessing.connection.Connection] = []
        self._processes: list[multiprocessing.process.BaseProcess] = []

    def __enter__(self) -> HoldingClients:
        context = multiprocessing.get_context("spawn")
        for spec in self._specs:
            parent_end, child_end = context.Pipe()
            process = context.Process(target=_client_process, args=(spec, child_end), daemon=True)
            process.start()
            child_end.close()
            self._pipes.append(parent_end)
            self._processes.append(process)
        return self

    def wait_ready(self, timeout: float) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        reports = []
        for pipe in self._pipes:
            if not pipe.poll(max(0.1, deadline - time.monotonic())):
                raise RuntimeError("an idle-connection client process did not report in time")
            reports.append(pipe.recv())
        return reports

    def close(self) -> None:
        for pipe in self._pipes:
            with contextlib.suppress(OSError):
                pipe.send("close")
        for pipe in self._pipes:
            with contextlib.suppress(OSError, EOFError):
                if pipe.poll(30):
                    pipe.recv()

    def __exit__(self, *exc: object) -> None:
        stop_processes(self._pipes, self._processes, "close", join_seconds=15)


def _client_process(spec: HoldSpec, pipe: multiprocessing.connection.Connection) -> None:
    import uvloop

    raise_open_files(spec.count + RESERVED_FILES)
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    try:
        asyncio.run(_hold(spec, pipe))
    finally:
        pipe.close()


async def _hold(spec: HoldSpec, pipe: multiprocessing.connection.Connection) -> None:
    loop = asyncio.get_running_loop()
    context: ssl.SSLContext | None = None
    if spec.tls:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        context.set_alpn_protocols(["http/1.1"])
    transports: list[asyncio.BaseTransport] = []
    errors: list[str] = []
    gate = asyncio.Semaphore(spec.in_flight)
    cpu_before = time.process_time()

    async def connect(index: int) -> None:
        async with gate:
            sock = _bound_socket(spec.sources[index % len(spec.sources)])
            try:
                await loop.sock_connect(sock, ("127.0.0.1", spec.port))
                transport, _ = await loop.create_connection(
                    asyncio.Protocol,
                    sock=sock,
                    ssl=context,
                    server_hostname="localhost" if context else None,
                )
            except OSError as exc:
                sock.close()
                if len(errors) < 5:
                    errors.append(f"connect: {exc}")
                return
            transports.append(transport)

    started = time.perf_counter()
    tasks = [asyncio.ensure_future(connect(index)) for index in range(spec.count)]
    _, pending = await asyncio.wait(tasks, timeout=spec.open_seconds)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    seconds = time.perf_counter() - started
    pipe.send(
        {
            "opened": len(transports),
            "failed": spec.count - len(transports),
            "seconds": round(seconds, 4),
            "cpu_seconds": round(time.process_time() - cpu_before, 2),
            "errors": errors if not pending else [*errors, f"{len(pending)} not opened in time"],
        }
    )
    told: asyncio.Future[None] = loop.create_future()

    def on_message() -> None:
        if not told.done():
            told.set_result(None)

    loop.add_reader(pipe.fileno(), on_message)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(told, HOLD_SECONDS_MAX)
    loop.remove_reader(pipe.fileno())
    for transport in transports:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        cast(asyncio.Transport, transport).abort()
    await asyncio.sleep(0.1)
    with contextlib.suppress(OSError):
        pipe.send({"closed": len(transports)})


def _bound_socket(source: str) -> socket.socket:
    """A non-blocking socket bound to ``source`` whose port the kernel picks at connect.

    ``bind((source, 0))`` alone would pick the port at bind time, searching for one free on
    every destination; that search grows with the ports in use and made 16,000 connects from
    one address take half a minute. With ``IP_BIND_ADDRESS_NO_PORT`` the port is picked at
    ``connect`` for this one destination.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    sock.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
    sock.bind((source, 0))
    return sock

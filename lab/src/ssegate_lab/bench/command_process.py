"""A spawned client process that holds streams and answers commands over a pipe.

Benchmarks keep their SSE clients out of the measuring process: each client process runs its
own uvloop, with the open-file limit raised for the streams it may hold, and is driven with
commands (``{"op": "open", ...}``) answered one at a time. :class:`ClientProcess` is the
driver's side; the process runs a :class:`Commands` made by a top-level factory (it is pickled
into the spawned process), which answers every command but ``exit``; on ``exit`` its
:meth:`~Commands.close` runs and the process ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import multiprocessing.connection
import os
from collections.abc import Callable
from typing import Any, Protocol, Self

from ssegate_lab.bench.load import raise_open_files


class Commands(Protocol):
    async def handle(self, command: dict[str, Any]) -> Any:
        """The answer to ``command``, sent back over the pipe."""

    async def close(self) -> Any:
        """Let every stream go (the process is ending)."""


async def _serve(pipe: multiprocessing.connection.Connection, commands: Commands) -> None:
    loop = asyncio.get_running_loop()
    waiting: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    def readable() -> None:
        # The loop made the pipe non-blocking; a large command must be read whole.
        os.set_blocking(pipe.fileno(), True)
        while pipe.poll():
            waiting.put_nowait(pipe.recv())

    loop.add_reader(pipe.fileno(), readable)
    try:
        while True:
            command = await waiting.get()
            if command["op"] == "exit":
                await commands.close()
                return
            pipe.send(await commands.handle(command))
    finally:
        loop.remove_reader(pipe.fileno())


def _run(
    pipe: multiprocessing.connection.Connection, streams: int, factory: Callable[[], Commands]
) -> None:
    import uvloop

    raise_open_files(streams + 256)
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    try:
        asyncio.run(_serve(pipe, factory()))
    finally:
        pipe.close()


class ClientProcess:
    """The driver's side of one client process; a context manager."""

    def __init__(
        self, factory: Callable[[], Commands], *, max_streams: int, timeout: float
    ) -> None:
        self.factory = factory
        self.max_streams = max_streams
        self.timeout = timeout
        self._pipe: multiprocessing.connection.Connection | None = None
        self._process: multiprocessing.process.BaseProcess | None = None

    def __enter__(self) -> Self:
        context = multiprocessing.get_context("spawn")
        parent_end, child_end = context.Pipe()
        self._process = context.Process(
            target=_run, args=(child_end, self.max_streams, self.factory), daemon=True
        )
        self._process.start()
        child_end.close()
        self._pipe = parent_end
        return self

    def ask(self, command: dict[str, Any]) -> Any:
        """Send ``command`` and wait up to ``timeout`` s for its answer."""
        assert self._pipe is not None
        self._pipe.send(command)
        if not self._pipe.poll(self.timeout):
            raise RuntimeError(f"the stream client did not answer {command['op']!r} in time")
        return self._pipe.recv()

    def __exit__(self, *exc: object) -> None:
        if self._pipe is not None:
            with contextlib.suppress(OSError):
                self._pipe.send({"op": "exit"})
        if self._process is not None:
            self._process.join(10)
            if self._process.is_alive():
                self._process.kill()
                self._process.join()
        if self._pipe is not None:
            self._pipe.close()

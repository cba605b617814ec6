"""What the Kafka benchmarks' clients share: an event-stream reader and a process to run in.

:class:`EventStreamReader` is one HTTP/1.1 connection (``asyncio.Protocol``): it sends its
request, settles its ``opened`` future with ``""`` once the answer is ``200
text/event-stream`` (else with the status line, or why the connection was lost), then hands
every body read to :meth:`EventStreamReader.scan`, which a subclass counts its events in
(:meth:`EventStreamReader.complete_blocks` keeps an event cut by a read for the next). A
stream that ends while it is not :attr:`~EventStreamReader.closing` calls
:meth:`EventStreamReader.ended_early`.

:class:`ClientProcess` spawns a process that runs a handler on uvloop and drives it over a
pipe: :meth:`ClientProcess.ask` sends ``{"op": name, **arguments}`` and waits for the answer of
``await handler.name(**arguments)``; ``exit`` (sent when the ``with`` ends) calls
``await handler.close()`` and stops the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import multiprocessing.connection
import os
import resource
from collections.abc import Callable
from typing import Any, Protocol, cast

from ssegate_lab.bench.load import raise_open_files


class EventStreamReader(asyncio.Protocol):
    """One HTTP/1.1 connection: the request, the status line, then the event stream."""

    def __init__(self, request: bytes, opened: asyncio.Future[str]) -> None:
        self._request = request
        self._opened = opened
        self._head = b""
        self._tail = b""
        self._streaming = False
        self.closing = False
        """Set before the client closes it: its end is not early."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        cast(asyncio.Transport, transport).write(self._request)

    def data_received(self, data: bytes) -> None:
        if self._streaming:
            self.scan(data)
            return
        self._head += data
        end = self._head.find(b"\r\n\r\n")
        if end < 0:
            return
        head = self._head[:end].lower()
        if head[9:12] != b"200" or b"text/event-stream" not in head:
            self._settle(head.split(b"\r\n", 1)[0].decode("latin-1"))
            return
        self._streaming = True
        self._settle("")
        rest, self._head = self._head[end + 4 :], b""
        if rest:
            self.scan(rest)

    def scan(self, data: bytes) -> None:
        """Body bytes of the event stream, as they come."""

    def complete_blocks(self, data: bytes) -> tuple[bytes, int]:
        """``data`` after what was kept of the last read, and where its last complete block
        ends (after its blank line; 0: none is complete yet); the rest is kept for the next."""
        buffer = self._tail + data if self._tail else data
        blank = buffer.rfind(b"\n\n")
        if blank < 0:
            self._tail = buffer
            return buffer, 0
        self._tail = buffer[blank + 2 :]
        return buffer, blank + 2

    def ended_early(self) -> None:
        """The stream ended while the client still wanted it."""

    def connection_lost(self, exc: Exception | None) -> None:
        if self._streaming and not self.closing:
            self.ended_early()
        self._settle(f"connection lost: {exc}")

    def _settle(self, error: str) -> None:
        if not self._opened.done():
            self._opened.set_result(error)


def cpu_seconds() -> float:
    """User and system CPU time of this process."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Handler(Protocol):
    async def close(self) -> dict[str, Any]: ...


async def _serve(pipe: multiprocessing.connection.Connection, handler: Handler) -> None:
    loop = asyncio.get_running_loop()
    commands: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    def readable() -> None:
        # The loop made the pipe non-blocking; a large command must be read whole.
        os.set_blocking(pipe.fileno(), True)
        try:
            while pipe.poll():
                commands.put_nowait(pipe.recv())
        except EOFError:  # the bench is gone: exit, rather than be told so on every turn
            loop.remove_reader(pipe.fileno())
            commands.put_nowait({"op": "exit"})

    loop.add_reader(pipe.fileno(), readable)
    try:
        while True:
            command = await commands.get()
            op = command.pop("op")
            if op == "exit":
                await handler.close()
                return
            pipe.send(await getattr(handler, op)(**command))
    finally:
        loop.remove_reader(pipe.fileno())


def _run(
    pipe: multiprocessing.connection.Connection, files: int, make: Callable[[], Handler]
) -> None:
    import uvloop

    raise_open_files(files)
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())

    async def main() -> None:
        await _serve(pipe, make())

    try:
        asyncio.run(main())
    finally:
        pipe.close()


class ClientProcess:
    """A spawned process running ``make()``'s handler with ``files`` open files allowed; a
    context manager. ``make`` must be importable (a class or a module-level function)."""

    def __init__(self, make: Callable[[], Handler], *, files: int, timeout: float) -> None:
        self._make = make
        self.files = files
        self.timeout = timeout
        self.pid = 0
        self._pipe: multiprocessing.connection.Connection | None = None
        self._process: multiprocessing.process.BaseProcess | None = None

    def __enter__(self) -> ClientProcess:
        context = multiprocessing.get_context("spawn")
        parent_end, child_end = context.Pipe()
        self._process = context.Process(
            target=_run, args=(child_end, self.files, self._make), daemon=True
        )
        self._process.start()
        self.pid = self._process.pid or 0
        child_end.close()
        self._pipe = parent_end
        return self

    def ask(self, op: str, **arguments: Any) -> dict[str, Any]:
        """The handler's answer to ``op``; fails when none comes within the timeout."""
        assert self._pipe is not None
        self._pipe.send({"op": op, **arguments})
        if not self._pipe.poll(self.timeout):
            raise RuntimeError(f"the client process did not answer {op!r} in time")
        answer: dict[str, Any] = self._pipe.recv()
        return answer

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

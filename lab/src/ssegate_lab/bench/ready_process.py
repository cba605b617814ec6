"""A server the bench runs as a child process, ready once it prints a line that says so.

:class:`ReadyProcess` starts a command with its output on a pipe, reads lines until one starts
with the ready prefix (then keeps reading them in a thread, the last ones kept in ``output``),
samples the process's CPU and memory from ``/proc``, and stops it with SIGTERM (SIGKILL after
ten seconds) when the block ends. A server that says nothing when it is ready (the gateway, the
Mercure hub) has its own runner that waits for its ports instead.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections import deque
from typing import Self

from ssegate_lab.bench.gateway import ProcessSample, sample

STOP_SECONDS = 10.0


class ReadyProcess:
    """``argv`` in a child process, ready when it prints a line starting with ``ready``."""

    def __init__(self, argv: list[str], ready: str, what: str, timeout: float = 20.0) -> None:
        self.argv = argv
        self.ready = ready
        self.what = what
        """Named in the error when the process does not get ready."""
        self.timeout = timeout
        self.process: subprocess.Popen[str] | None = None
        self.output: deque[str] = deque(maxlen=50)
        self._reader: threading.Thread | None = None

    def __enter__(self) -> Self:
        self.process = subprocess.Popen(
            self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert self.process.stdout is not None
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            self.output.append(line.rstrip())
            if line.startswith(self.ready):
                self._reader = threading.Thread(target=self._drain, daemon=True)
                self._reader.start()
                return self
        self.__exit__()
        raise RuntimeError(f"{self.what} did not start:\n" + "\n".join(self.output))

    def _drain(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line.rstrip())

    def __exit__(self, *exc: object) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self._reader is not None:
            self._reader.join(STOP_SECONDS)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def sample(self) -> ProcessSample:
        return sample(self.pid)

"""What a gateway process's event loop was doing while it did not run: slow moments and stacks.

A benchmark's worst latency is set by the few moments a worker's event loop did not turn for
tens of milliseconds. The gateway's own telemetry sees a turn only once it ends, and a profiler
that samples all the time costs what it measures, so this samples only while the loop is late.
It runs as a daemon thread inside a gateway process (put there by
:mod:`ssegate_lab.loop_lag_site`, without changing the gateway) and:

- every :data:`PERIOD_SECONDS` posts a marker to the loop (``call_soon_threadsafe``) and notes
  when it ran: one cheap callback per period while the loop is fine;
- while a marker is later than the threshold, samples the loop thread's Python stack
  (``sys._current_frames()``) every period, and the other threads' too (a thread holding the GIL
  stops the loop as surely as the loop's own work);
- when the marker has run, writes the slow moment as one JSON line to ``<dir>/<pid>.jsonl`` and
  flushes it: a worker ends with ``os._exit`` (no ``atexit``), so nothing waits for the exit.

A moment (``"kind": "moment"``) holds its start (wall and ``CLOCK_MONOTONIC``, which every
process of the machine shares), its duration until the marker ran, the pid, the collapsed
stacks with their counts (``file:function:line;...``, the leaf frame last), the garbage
collections that overlapped it (generation, ms, on the loop thread or another), and what the
loop thread did meanwhile by ``/proc/self/task/<tid>/schedstat``: ms on a CPU and ms waiting for
one (a loop that did not run because the machine gave it no CPU looks like neither busy nor
blocked). Each process first writes one ``"kind": "process"`` line.

Only stacks of Python frames are seen: a loop stopped inside C holding the GIL is sampled once
it lets go; its leaf frame is then the Python line that called into C. The collapsed stacks and
everything else read from frames are strings of the process's own code, never data it serves.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType
from typing import IO, Any

DIR_ENV = "SSEGATE_LAB_LOOP_LAG_DIR"
"""Where each process writes ``<pid>.jsonl``; unset: nothing is sampled."""
THRESHOLD_ENV = "SSEGATE_LAB_LOOP_LAG_MS"
"""How late (ms) a marker is before the moment counts as slow; :data:`THRESHOLD_MS` unset."""
THRESHOLD_MS = 20.0
PERIOD_SECONDS = 0.002
MAX_DEPTH = 64
"""Frames kept of a stack, from the leaf."""
MAX_STACKS = 200
"""Distinct stacks kept per moment and thread kind; further samples are counted, not kept."""
_STDLIB = "/python{}.{}/".format(*sys.version_info[:2])
SITE_DIR = Path(__file__).parent / "loop_lag_site"
"""The directory whose ``sitecustomize`` starts the sampler in every gateway process."""


def profiled_env(env: Mapping[str, str], directory: Path) -> dict[str, str]:
    """``env`` (added to the gateway's ``os.environ``) with the sampler switched on, writing to
    ``directory`` (made here): :data:`SITE_DIR` first on ``PYTHONPATH``."""
    directory.mkdir(parents=True, exist_ok=True)
    inherited = env.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    path = os.pathsep.join(p for p in (str(SITE_DIR), inherited) if p)
    return {**env, "PYTHONPATH": path, DIR_ENV: str(directory.resolve())}


def collapse(frame: FrameType | None) -> str:
    """``file:function:line`` of each frame from the root to ``frame`` (the leaf), joined by
    ``;``; at most :data:`MAX_DEPTH` frames, from the leaf."""
    names: list[str] = []
    while frame is not None and len(names) < MAX_DEPTH:
        code = frame.f_code
        names.append(f"{short_path(code.co_filename)}:{code.co_name}:{frame.f_lineno}")
        frame = frame.f_back
    return ";".join(reversed(names))


def short_path(filename: str) -> str:
    """A source file's path from its package (after ``site-packages/``, ``/src/`` or the
    standard library's directory), else its last two parts."""
    for marker in ("site-packages/", "/src/", _STDLIB):
        at = filename.rfind(marker)
        if at >= 0:
            return filename[at + len(marker) :]
    return "/".join(filename.split("/")[-2:])


class SlowMoment:
    """One moment the loop was late: its stack samples as they come, then its JSON line."""

    def __init__(self, posted: float, wall: float) -> None:
        self.posted = posted
        self.wall = wall - (time.monotonic() - posted)
        self.loop_stacks: Counter[str] = Counter()
        self.other_stacks: Counter[str] = Counter()
        self.samples = 0
        self.dropped = 0

    def sample(self, frames: Mapping[int, FrameType], loop_thread: int, sampler: int) -> None:
        """Count the loop thread's stack, and each other thread's but the sampler's own."""
        self.samples += 1
        names = {thread.ident: thread.name for thread in threading.enumerate()}
        for ident, frame in frames.items():
            if ident == sampler:
                continue
            if ident == loop_thread:
                self._count(self.loop_stacks, collapse(frame))
            else:
                name = names.get(ident, str(ident))
                self._count(self.other_stacks, f"[{name}];{collapse(frame)}")

    def _count(self, stacks: Counter[str], stack: str) -> None:
        if stack in stacks or len(stacks) < MAX_STACKS:
            stacks[stack] += 1
        else:
            self.dropped += 1

    def line(
        self, ran: float, pid: int, cpu: tuple[float, float] | None, collections: list[Any]
    ) -> dict[str, Any]:
        """The moment as one JSON object: ``cpu`` is the loop thread's (on-CPU ms, waiting ms)
        over it, ``collections`` the garbage collections that overlapped it."""
        return {
            "kind": "moment",
            "pid": pid,
            "start_wall": round(self.wall, 4),
            "start_monotonic": round(self.posted, 4),
            "duration_ms": round((ran - self.posted) * 1000, 2),
            "samples": self.samples,
            "loop_thread_on_cpu_ms": None if cpu is None else round(cpu[0], 2),
            "loop_thread_waiting_for_cpu_ms": None if cpu is None else round(cpu[1], 2),
            "gc": collections,
            "stacks": dict(self.loop_stacks.most_common()),
            "other_threads": dict(self.other_stacks.most_common()),
            "stacks_dropped": self.dropped,
        }


class Collections:
    """The garbage collections of this process, as they end (``gc.callbacks``): the last few
    hundred, to tell which overlapped a slow moment."""

    def __init__(self, loop_thread: int) -> None:
        self.loop_thread = loop_thread
        self.ended: deque[tuple[float, float, int, bool]] = deque(maxlen=512)
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.monotonic()
        else:
            on_loop = threading.get_ident() == self.loop_thread
            self.ended.append((self._started, time.monotonic(), info["generation"], on_loop))

    def overlapping(self, started: float, ended: float) -> list[dict[str, Any]]:
        return [
            {"generation": gen, "ms": round((end - start) * 1000, 2), "on_loop_thread": on_loop}
            for start, end, gen, on_loop in list(self.ended)
            if end >= started and start <= ended
        ]


def _schedstat(native_id: int) -> Callable[[], tuple[float, float] | None]:
    """A reader of a thread's (seconds on a CPU, seconds waiting for one) since it started."""
    path = f"/proc/self/task/{native_id}/schedstat"

    def read() -> tuple[float, float] | None:
        try:
            with open(path, "rb") as stat:
                running, waiting = stat.read().split()[:2]
        except (OSError, ValueError):
            return None
        return int(running) / 1e9, int(waiting) / 1e9

    return read


class LoopLagSampler:
    """The sampling thread of one event loop (which runs on the thread that made it)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        out: Path,
        *,
        threshold_ms: float = THRESHOLD_MS,
        period: float = PERIOD_SECONDS,
    ) -> None:
        self.loop = loop
        self.out = out
        self.threshold = threshold_ms / 1000
        self.period = period
        self.loop_thread = threading.get_ident()
        self.native_id = threading.get_native_id()
        self.pid = os.getpid()
        self.collections = Collections(self.loop_thread)
        self._cpu = _schedstat(self.native_id)
        self._ran = 0
        self._ran_at = 0.0
        self._stopped = threading.Event()
        self.armed = threading.Event()
        """Set once the loop has run a first marker: lateness is measured from then on."""
        self._file: IO[str] | None = None
        self._thread = threading.Thread(target=self._run, name="loop-lag", daemon=True)

    def start(self) -> None:
        gc.callbacks.append(self.collections)
        self._write(
            {
                "kind": "process",
                "pid": self.pid,
                "ppid": os.getppid(),
                "threshold_ms": self.threshold * 1000,
                "period_ms": self.period * 1000,
                "started_wall": time.time(),
                "started_monotonic": time.monotonic(),
            }
        )
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self.collections)

    def _mark(self, number: int) -> None:
        self._ran_at = time.monotonic()
        self._ran = number

    def _run(self) -> None:
        number = 0
        running = False  # the first marker runs once the loop does: lateness counts from then
        while not self._stopped.is_set():
            number += 1
            posted = time.monotonic()
            cpu_before = self._cpu() if running else None
            try:
                self.loop.call_soon_threadsafe(self._mark, number)
            except RuntimeError:  # the loop is closed
                return
            moment: SlowMoment | None = None
            while self._ran != number:
                time.sleep(self.period)
                if self._stopped.is_set():
                    return
                if running and time.monotonic() - posted > self.threshold:
                    if moment is None:
                        moment = SlowMoment(posted, time.time())
                    moment.sample(sys._current_frames(), self.loop_thread, threading.get_ident())
            if moment is not None or (running and self._ran_at - posted > self.threshold):
                moment = moment or SlowMoment(posted, time.time())
                self._write_moment(moment, cpu_before)
            running = True
            self.armed.set()
            time.sleep(self.period)

    def _write_moment(self, moment: SlowMoment, cpu_before: tuple[float, float] | None) -> None:
        cpu_after = self._cpu()
        cpu = None
        if cpu_before is not None and cpu_after is not None:
            cpu = ((cpu_after[0] - cpu_before[0]) * 1000, (cpu_after[1] - cpu_before[1]) * 1000)
        overlapping = self.collections.overlapping(moment.posted, self._ran_at)
        self._write(moment.line(self._ran_at, self.pid, cpu, overlapping))

    def _write(self, line: dict[str, Any]) -> None:
        try:
            if self._file is None:
                self._file = open(self.out / f"{self.pid}.jsonl", "a", encoding="utf-8")  # noqa: SIM115
            self._file.write(json.dumps(line) + "\n")
            self._file.flush()
        except OSError as exc:
            from ssegate.telemetry import log

            log.warning("lab.loop_lag.unwritable", path=str(self.out), reason=str(exc))
            self._stopped.set()


_sampler: LoopLagSampler | None = None
_make_loop: Callable[[], asyncio.AbstractEventLoop] | None = None


def current() -> LoopLagSampler | None:
    """The sampler of this process's latest main-thread loop, if :func:`install` made one."""
    return _sampler


def install(environ: Mapping[str, str] = os.environ) -> bool:
    """Sample every event loop this process (or a child it forks) makes on its main thread
    from now on, when :data:`DIR_ENV` is set; whether it is. A loop is made by
    ``asyncio.new_event_loop`` (``asyncio.run`` calls it; uvloop's policy answers it), so that
    is wrapped; a forked child starts no thread of its parent's, and starts its own sampler
    when it makes its own loop."""
    global _make_loop
    directory = environ.get(DIR_ENV)
    if not directory or _make_loop is not None:
        return bool(directory)
    threshold = float(environ.get(THRESHOLD_ENV) or THRESHOLD_MS)
    original = _make_loop = asyncio.events.new_event_loop

    def new_event_loop() -> asyncio.AbstractEventLoop:
        global _sampler
        loop = original()
        if threading.current_thread() is threading.main_thread():
            if _sampler is not None:
                _sampler.stop()
            _sampler = LoopLagSampler(loop, Path(directory), threshold_ms=threshold)
            _sampler.start()
        return loop

    asyncio.events.new_event_loop = new_event_loop
    asyncio.new_event_loop = new_event_loop
    os.register_at_fork(after_in_child=_forget_parent_sampler)
    return True


def _forget_parent_sampler() -> None:
    """In a forked child: the parent's sampler thread did not survive the fork (its locks may
    have been held by it, so none is touched); only its garbage-collection hook is dropped."""
    global _sampler
    if _sampler is not None:
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(_sampler.collections)
        _sampler = None

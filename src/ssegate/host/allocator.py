"""Which C allocator a gateway's memory comes from: jemalloc where the machine has it.

CPython's own allocator for objects of up to 512 bytes (pymalloc) carves them from 1 MiB arenas
of 16 KiB pools. It gives an arena back to the system only once every block in it is free, and
never gives back the pages of an empty pool inside an arena it keeps. A gateway's long-lived
objects are spread over every arena, because its Kafka cache turns over all the time and each
new record takes whatever block is free. So the memory a crowd of connections took stays
resident once they are gone: 1,000 clients dropped for not reading left the gateway 10 MiB
(13 %) over its baseline, of which 8 MiB were arenas the crowd had added, none of them given
back, with 261 empty pools (4 MiB) in them (``ssegate bench stalled``; docs/performance.md).

jemalloc (a well-kept allocator, packaged by Debian as ``libjemalloc2``) gives back the pages
that are no longer in use after a few seconds, whatever else lives beside them, and serves each
thread from an arena of its own, so the records the Kafka fetch thread makes do not settle
among the loop thread's connections. With it, the same crowd left 6.7 MiB over a baseline
3 MiB higher, for the same CPU.

An allocator is chosen when a process starts, so ``ssegate start`` runs itself again, once,
with jemalloc preloaded and CPython's small-object allocator off (``PYTHONMALLOC=malloc``),
before it reads its config; the pid is the same. The variables that did that are put back as
they were in the new process, so that what it runs (a Kafka broker, for one) starts as it
would have. ``SSEGATE_ALLOCATOR`` chooses: ``jemalloc`` (required: start refuses when the
library is missing), ``python`` (CPython's own), or unset (jemalloc when found);
``SSEGATE_HOST_TUNING=off`` is ``python`` too (:mod:`ssegate.host.switches`).
"""

from __future__ import annotations

import ctypes.util
import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from ssegate.config.errors import ConfigError
from ssegate.host import switches

ENVIRONMENT = switches.ALLOCATOR.variable
"""``jemalloc``, ``python``, or unset (``jemalloc`` where found)."""
LIBRARY = "libjemalloc.so.2"
"""The soname of Debian's ``libjemalloc2``; what is preloaded is the one the loader's cache
names (:func:`ctypes.util.find_library`)."""
RESTORE = "SSEGATE_ALLOCATOR_RESTORE"
"""Set for the process run again: the variables to put back, as they were before."""
_PRELOADED = ("LD_PRELOAD", "PYTHONMALLOC")

Allocator = Literal["jemalloc", "python"]


@dataclass(frozen=True, slots=True)
class Plan:
    """What a starting process does about its allocator."""

    allocator: Allocator
    """The allocator the gateway runs on."""
    environment: Mapping[str, str] | None = None
    """The environment to run again with (None: go on in this process)."""


def plan(environ: Mapping[str, str], found: str | None) -> Plan:
    """The plan for a process started with ``environ`` on a machine where jemalloc is ``found``
    (its soname, or None); pure.

    Raises :class:`ConfigError` for an unknown ``SSEGATE_ALLOCATOR``, or ``jemalloc`` asked for
    where it is not found.
    """
    wanted = environ.get(ENVIRONMENT, "")
    if wanted not in ("", "jemalloc", "python"):
        raise ConfigError(
            ENVIRONMENT, f"{wanted!r} is not an allocator (jemalloc, or python for CPython's own)"
        )
    if RESTORE in environ:
        return Plan("jemalloc")  # this is the process run again
    if not switches.ALLOCATOR.on(environ):
        return Plan("python")
    if found is None:
        if wanted == "jemalloc":
            raise ConfigError(
                ENVIRONMENT, f"jemalloc was asked for, and {LIBRARY} is not on this machine"
            )
        return Plan("python")
    preloaded = environ.get("LD_PRELOAD", "")
    if "jemalloc" in preloaded and environ.get("PYTHONMALLOC") == "malloc":
        return Plan("jemalloc")  # started on it already
    environment = dict(environ)
    environment[RESTORE] = json.dumps({name: environ.get(name) for name in _PRELOADED})
    environment["LD_PRELOAD"] = f"{found} {preloaded}".strip()
    environment["PYTHONMALLOC"] = "malloc"
    return Plan("jemalloc", environment)


def restored(environ: Mapping[str, str]) -> dict[str, str] | None:
    """``environ`` with the variables a run-again process was given put back as they were
    before (None when this process was not run again); pure."""
    saved = environ.get(RESTORE)
    if saved is None:
        return None
    environment = {name: value for name, value in environ.items() if name != RESTORE}
    try:
        before = json.loads(saved)
    except ValueError:
        before = {}
    for name in _PRELOADED:
        value = before.get(name) if isinstance(before, dict) else None
        if isinstance(value, str):
            environment[name] = value
        else:
            environment.pop(name, None)
    return environment


def choose(argv: Sequence[str] | None = None) -> Allocator:
    """Apply :func:`plan` to this process: run it again on jemalloc (no return), or go on.

    ``argv`` is the command line to run again (default: this process's own).
    """
    decided = plan(os.environ, ctypes.util.find_library("jemalloc"))
    if decided.environment is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        command = list(argv if argv is not None else sys.orig_argv)
        try:
            os.execve(sys.executable, command, decided.environment)
        except OSError:
            return "python"  # cannot run again: go on, on CPython's own allocator
    environment = restored(os.environ)
    if environment is not None:
        os.environ.clear()
        os.environ.update(environment)
    return decided.allocator


def jemalloc_mapped(pid: int | None = None) -> bool:
    """Whether jemalloc is in the memory map of process ``pid`` (None: this one)."""
    path = f"/proc/{'self' if pid is None else pid}/maps"
    try:
        with open(path, encoding="ascii", errors="replace") as maps:
            return "jemalloc" in maps.read()
    except OSError:
        return False


def in_use() -> Allocator:
    """The allocator this process's objects come from: jemalloc when it is mapped and CPython's
    small-object allocator has no block out (it is off)."""
    return "jemalloc" if jemalloc_mapped() and sys.getallocatedblocks() == 0 else "python"

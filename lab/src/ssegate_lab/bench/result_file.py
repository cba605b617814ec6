"""Writing a bench result file, with what it was measured on and by which command.

Every file the harness writes goes through :func:`write`: a scenario's result
(``ssegate bench SCENARIO``, and its ``.partial`` file while a long one runs), the summary of
``ssegate bench all``, and the results of the lab's standalone probes (``write_path.py``,
``tls_records.py``). :func:`write` adds to the results what no figure can be read without:

- ``provenance``: the exact command line the process was started with (``sys.orig_argv``,
  the interpreter and its options included), its working directory, the source tree the
  gateway is imported from (its git commit, whether it was clean, and if not which paths
  differed) and when the command started;
- ``machine``: its cores (and how many this process may use), memory, CPU model, kernel and
  Python, and its load average when the command started;
- ``finished_utc`` (not in a partial file).

What must be taken when the command starts (the load average above all: a run's own load
raises it) is taken by :func:`started`, which a command calls first and hands to
:func:`write`.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GIT_SECONDS = 10.0
"""How long a git query of the source tree may take."""
CHANGES_KEPT = 20
"""Changed paths a result lists (the count is always there)."""


def utc(epoch: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def gateway_source() -> Path:
    """The directory the gateway's package is imported from."""
    import ssegate

    return Path(ssegate.__file__).resolve().parent


def _git(tree: Path, *args: str) -> str | None:
    try:
        found = subprocess.run(
            ["git", "-C", str(tree), *args],
            capture_output=True, text=True, timeout=GIT_SECONDS, check=True,
            env=os.environ | {"GIT_OPTIONAL_LOCKS": "0"},
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return found.stdout


def source_tree(path: Path) -> dict[str, Any]:
    """The git checkout holding ``path``: its commit, whether its tree is clean (untracked files
    count, ignored ones do not), and the paths that differ. ``commit`` is None outside a
    checkout (an installed wheel): then nothing says what was measured but the version."""
    head = _git(path, "rev-parse", "HEAD", "--show-toplevel")
    status = _git(path, "status", "--porcelain", "--untracked-files=normal")
    if head is None or status is None:
        return {"commit": None, "clean": None, "path": str(path)}
    commit, top = [*head.splitlines(), "", ""][:2]
    changed = [line[3:] for line in status.splitlines() if line.strip()]
    return {
        "commit": commit,
        "clean": not changed,
        "changed": len(changed),
        "changed_paths": changed[:CHANGES_KEPT],
        "path": top,
    }


def _memory_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _cores_available() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return None


def machine() -> dict[str, Any]:
    """What the numbers were measured on (what does not change while a command runs)."""
    return {
        "cpus": os.cpu_count(),
        "cores_available": _cores_available(),
        "memory_bytes": _memory_bytes(),
        "cpu_model": _cpu_model(),
        "kernel": platform.release(),
        "python": platform.python_version(),
    }


@dataclass(frozen=True, slots=True)
class Provenance:
    """What a command's result files record of its start."""

    argv: tuple[str, ...]
    cwd: str
    started_utc: str
    load_average: tuple[float, float, float]
    source: dict[str, Any]

    def as_json(self) -> dict[str, Any]:
        return {
            "command_line": shlex.join(self.argv),
            "argv": list(self.argv),
            "cwd": self.cwd,
            "started_utc": self.started_utc,
            "commit": self.source.get("commit"),
            "tree_clean": self.source.get("clean"),
            "source": self.source,
        }


def started(argv: Sequence[str] | None = None, source: Path | None = None) -> Provenance:
    """Take, as a command starts, what its result files record: ``argv`` (default: the
    process's whole command line), the load average now, and the source tree at ``source``
    (default: the gateway's)."""
    load = os.getloadavg()
    return Provenance(
        argv=tuple(sys.orig_argv if argv is None else argv),
        cwd=os.getcwd(),
        started_utc=utc(),
        load_average=(round(load[0], 2), round(load[1], 2), round(load[2], 2)),
        source=source_tree(gateway_source() if source is None else source),
    )


def record(results: dict[str, Any], provenance: Provenance, *, partial: bool = False) -> None:
    """Add to ``results`` what the file must record: its provenance, the machine with its load
    average at the start, and (unless ``partial``) when it was finished."""
    results["provenance"] = provenance.as_json()
    load = list(provenance.load_average)
    results["machine"] = machine() | {"load_average_at_start": load}
    if not partial:
        results["finished_utc"] = utc()


def write(
    results: dict[str, Any], out: Path, provenance: Provenance, *, partial: bool = False
) -> Path:
    """Write ``results`` as JSON to ``out`` (its directory made if need be) with what
    :func:`record` adds; the path written."""
    record(results, provenance, partial=partial)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    return out


def default_path(scenario: str, directory: Path = Path("bench-results")) -> Path:
    """``bench-results/<scenario>-<UTC time>.json``."""
    return directory / f"{scenario}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"

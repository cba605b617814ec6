"""Java jars resolved once from Maven Central into ssegate's cache.

:func:`ensure_maven_jars` runs ``mvn dependency:copy-dependencies`` on a small pom and keeps the
result in ``<home>/lib``; a marker file written after a complete copy makes every later call
return at once. The cache root is :func:`ssegate.cache.cache_root`; ``./run`` fills it, and
offline (``$SSEGATE_OFFLINE``, as in the tests) nothing is resolved: missing jars are a
:class:`~ssegate.cache.NotPrepared` error. The pipeline resolves Spark's Kafka connector with it;
the local broker launcher (``ssegate_lab.broker``) the broker's jars.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from ssegate.cache import refuse_when_offline
from ssegate.telemetry.log import event

_MARKER = ".resolved"
_MAVEN_TIMEOUT = 900.0
_OUTPUT_TAIL_LINES = 20


class JarsError(RuntimeError):
    """Maven could not resolve a pom's jars."""


def ensure_maven_jars(
    home: Path,
    pom: bytes,
    arguments: Sequence[str],
    *,
    expected: str,
    marker: str,
    step: str,
    what: str,
) -> Path:
    """Return ``home/lib``, filled once by ``mvn dependency:copy-dependencies`` on ``pom``.

    ``arguments`` are extra Maven arguments (``-Dname=value``); ``expected`` is a glob one of the
    copied jars must match for the copy to count; ``marker`` is written to the marker file.
    ``step`` (the ``./run`` setup step) and ``what`` name the jars when they are missing offline.
    """
    lib = home / "lib"
    if (lib / _MARKER).is_file():
        return lib
    refuse_when_offline(step, what, lib)
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be resolving the same version
        if not (lib / _MARKER).is_file():
            _resolve_jars(home, lib, pom, arguments, expected, marker)
    return lib


def _resolve_jars(
    home: Path, lib: Path, pom: bytes, arguments: Sequence[str], expected: str, marker: str
) -> None:
    pom_path = home / "pom.xml"
    pom_path.write_bytes(pom)
    staging = home / "lib.partial"
    shutil.rmtree(staging, ignore_errors=True)
    command = [
        "mvn", "-q", "-B", "-f", str(pom_path), "dependency:copy-dependencies",
        "-DincludeScope=runtime", f"-DoutputDirectory={staging}", *arguments,
    ]  # fmt: skip
    started = time.monotonic()
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=_MAVEN_TIMEOUT, check=False
        )
    except FileNotFoundError:
        raise JarsError(f"cannot resolve the jars of {home.name}: mvn is not on PATH") from None
    except subprocess.TimeoutExpired:
        raise JarsError(
            f"`{' '.join(command)}` did not finish within {_MAVEN_TIMEOUT:.0f} s"
        ) from None
    jars = list(staging.glob(expected)) if staging.is_dir() else []
    if done.returncode != 0 or not jars:
        tail = tail_lines((done.stdout + done.stderr).splitlines())
        raise JarsError(f"`{' '.join(command)}` failed (exit {done.returncode}):\n{tail}")
    shutil.rmtree(lib, ignore_errors=True)
    staging.rename(lib)
    (lib / _MARKER).write_text(marker)
    event("kafka.jars.resolved", lib=lib, seconds=round(time.monotonic() - started, 1))


def tail_lines(lines: list[str], count: int = _OUTPUT_TAIL_LINES) -> str:
    """The last ``count`` lines, joined; what an error shows of a tool's output."""
    return "\n".join(lines[-count:]) or "(no output)"

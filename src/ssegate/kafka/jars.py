"""The jars of the local Kafka broker: resolved once from Maven Central into ssegate's cache.

``ensure_broker_jars`` runs ``mvn dependency:copy-dependencies`` on the small pom shipped next to
this module (Kafka's broker plus a log4j2 backend) and keeps the result in
``<cache root>/kafka-<version>/lib``; a marker file written after a complete copy makes every
later call return at once. The cache root is :func:`ssegate.cache.cache_root`; ``./run`` fills
it (setup step ``kafka``), and offline (``$SSEGATE_OFFLINE``, as in the tests) nothing is
resolved: missing jars are a :class:`~ssegate.cache.NotPrepared` error. :func:`ensure_maven_jars`
is that path for any pom (the pipeline resolves Spark's Kafka connector with it).
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from ssegate.cache import cache_root, refuse_when_offline
from ssegate.telemetry.log import event

SETUP_STEP = "kafka"
KAFKA_VERSION = "4.1.1"
LOG4J_VERSION = "2.24.3"
_MARKER = ".resolved"
_MAVEN_TIMEOUT = 900.0
_OUTPUT_TAIL_LINES = 20


class BrokerError(RuntimeError):
    """The broker's jars could not be resolved, or the broker could not start or answer."""


def ensure_broker_jars(cache_dir: Path | None = None) -> Path:
    """Return the directory holding the broker's jars, resolving them with Maven the first time.

    ``cache_dir`` replaces the cache root; the jars land in ``<root>/kafka-<version>/lib``. A
    marker file written after a complete resolution makes later calls return at once.
    """
    return ensure_maven_jars(
        (cache_dir or cache_root()) / f"kafka-{KAFKA_VERSION}",
        resources.files(__package__).joinpath("broker-pom.xml").read_bytes(),
        [f"-Dkafka.version={KAFKA_VERSION}", f"-Dlog4j.version={LOG4J_VERSION}"],
        expected="kafka_2.13-*.jar",
        marker=f"kafka {KAFKA_VERSION}\nlog4j {LOG4J_VERSION}\n",
        step=SETUP_STEP,
        what=f"the jars of the Kafka {KAFKA_VERSION} broker",
    )


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
        raise BrokerError(f"cannot resolve the jars of {home.name}: mvn is not on PATH") from None
    except subprocess.TimeoutExpired:
        raise BrokerError(
            f"`{' '.join(command)}` did not finish within {_MAVEN_TIMEOUT:.0f} s"
        ) from None
    jars = list(staging.glob(expected)) if staging.is_dir() else []
    if done.returncode != 0 or not jars:
        tail = tail_lines((done.stdout + done.stderr).splitlines())
        raise BrokerError(f"`{' '.join(command)}` failed (exit {done.returncode}):\n{tail}")
    shutil.rmtree(lib, ignore_errors=True)
    staging.rename(lib)
    (lib / _MARKER).write_text(marker)
    event("kafka.jars.resolved", lib=lib, seconds=round(time.monotonic() - started, 1))


def tail_lines(lines: list[str], count: int = _OUTPUT_TAIL_LINES) -> str:
    """The last ``count`` lines, joined; what an error shows of a tool's output."""
    return "\n".join(lines[-count:]) or "(no output)"

"""Where ssegate keeps what it fetches or builds once, and whether it may fetch at all.

Everything lives under one root, ``$SSEGATE_CACHE`` or ``~/.cache/ssegate``: the Kafka broker's
jars, Spark's Kafka connector, the Apicurio registry, the benchmark peers (Mercure, KafkaSSE)
and the test tools. ``./run`` fills it before anything else runs (:mod:`ssegate_lab.setup_tools`).

With ``SSEGATE_OFFLINE`` set to anything but ``0`` (the test suite sets it), nothing is fetched or
built: a missing artifact is a :class:`NotPrepared` error naming the ``./run`` setup step that
provides it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

OFFLINE = "SSEGATE_OFFLINE"


def cache_root() -> Path:
    """``$SSEGATE_CACHE``, or ``~/.cache/ssegate``."""
    configured = os.environ.get("SSEGATE_CACHE")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "ssegate"


def offline() -> bool:
    """True when nothing may be fetched or built (``$SSEGATE_OFFLINE``)."""
    return os.environ.get(OFFLINE, "") not in ("", "0")


@contextmanager
def offline_mode() -> Iterator[None]:
    """Within the block nothing is fetched or built: what is missing raises :class:`NotPrepared`."""
    before = os.environ.get(OFFLINE)
    os.environ[OFFLINE] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ[OFFLINE]
        else:
            os.environ[OFFLINE] = before


class NotPrepared(RuntimeError):
    """An artifact is missing and may not be fetched or built here."""

    def __init__(self, step: str, what: str, where: Path) -> None:
        super().__init__(
            f"{what} is missing (looked in {where}): run ./run test or ./run setup"
            f" (setup step '{step}')"
        )
        self.step = step


def offline_refusal(step: str, what: str, where: Path) -> NotPrepared | None:
    """The error to give instead of fetching or building ``what``; ``None`` when online."""
    return NotPrepared(step, what, where) if offline() else None


def refuse_when_offline(step: str, what: str, where: Path) -> None:
    """Raise :class:`NotPrepared` when offline; call it right before fetching or building."""
    refusal = offline_refusal(step, what, where)
    if refusal is not None:
        raise refusal

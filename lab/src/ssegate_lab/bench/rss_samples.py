"""A gateway's resident memory sampled from a thread while a benchmark runs (a soak: does memory
stay flat?), read from ``/proc`` by :class:`~ssegate_lab.bench.gateway.GatewayProcess`."""

from __future__ import annotations

import threading
import time
from typing import Any

from ssegate_lab.bench.gateway import GatewayProcess


class RssSamples:
    """The gateway's RSS every ``every`` seconds from a thread, until :meth:`stop`."""

    def __init__(self, gateway: GatewayProcess, every: float) -> None:
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if every > 0:
            started = time.monotonic()

            def run() -> None:
                while not self._stop.wait(every):
                    mib = gateway.sample().rss_bytes / 2**20
                    self.samples.append((round(time.monotonic() - started, 1), round(mib, 1)))

            self._thread = threading.Thread(target=run, daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def summary(self) -> dict[str, Any]:
        """The samples, and the growth from the first one past the first fifth of the run."""
        if not self.samples:
            return {}
        settled = self.samples[len(self.samples) // 5][1]
        return {
            "rss_mib_samples": self.samples,
            "rss_growth_after_first_fifth": round(self.samples[-1][1] / settled - 1, 3),
        }

"""The ``stdout`` exporter: every log event written to stdout as one JSON line."""

from __future__ import annotations

from ssegate.config.model import Component
from ssegate.telemetry.log import enable_stdout_events


def start_stdout(component: Component) -> None:
    """Turn on JSON event lines on stdout (the exporter has no options)."""
    enable_stdout_events()

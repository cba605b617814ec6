"""The ``stdout`` exporter: every log event written to stdout as one JSON line."""

from __future__ import annotations

from collections.abc import Mapping

from ssegate.config.model import Component
from ssegate.telemetry.log import enable_stdout_events


def start_stdout(component: Component, attributes: Mapping[str, str] | None = None) -> None:
    """Turn on JSON event lines on stdout, each with ``attributes`` (``telemetry.attributes``;
    the exporter has no options of its own)."""
    enable_stdout_events(attributes=attributes)

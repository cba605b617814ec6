"""Structured log events: one line per connection, request, route decision or error.

Code anywhere calls ``event("http.request", binding="north_http_server", status=404, ...)``.
Without a ``stdout`` exporter, warnings and errors still reach stderr as plain lines (a config
problem or a dropped client is never silent); with one, every event is written to stdout as a
JSON object, the way Zilla's stdout exporter writes one line per event, with the config's
``telemetry.attributes`` (``{"service.namespace": "example"}``) on every line that has any.

An event written to stdout does not pass through the ``ssegate`` logger, so whatever catches that
logger's records (the ``otlp`` exporter) also registers with :func:`add_stdout_sink` and is
handed each such event as its JSON line, at the same level threshold the logger applies.

A field's value may come from outside (a config value, a header, a variable of an env file): one
longer than :data:`MAX_FIELD_CHARS` is cut there and says how long it was, so no line is larger
than its fields allow.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

logger = logging.getLogger("ssegate")

_stdout_events = False
_out: TextIO = sys.stdout
_attributes: dict[str, str] = {}
_stdout_sinks: list[Callable[[int, str], None]] = []

MAX_FIELD_CHARS = 1024
"""The most of one field's value a line shows."""


def enable_stdout_events(
    out: TextIO | None = None, attributes: Mapping[str, str] | None = None
) -> None:
    """Write every event to ``out`` (stdout) as a JSON line: the ``stdout`` exporter. Each line
    carries ``attributes`` (the config's ``telemetry.attributes``) when there are any."""
    global _stdout_events, _out, _attributes
    _stdout_events = True
    _out = out or sys.stdout
    _attributes = dict(attributes or {})


def add_stdout_sink(sink: Callable[[int, str], None]) -> None:
    """Hand ``sink`` ``(level, JSON line)`` of each event written to stdout from now on."""
    _stdout_sinks.append(sink)


def remove_stdout_sink(sink: Callable[[int, str], None]) -> None:
    if sink in _stdout_sinks:
        _stdout_sinks.remove(sink)


def disable_stdout_events() -> None:
    global _stdout_events
    _stdout_events = False


def event(name: str, *, binding: str = "", level: int = logging.INFO, **fields: Any) -> None:
    """Record event ``name`` (``tcp.accept``, ``http.request``, ``sse.slow_client_closed``)."""
    if _stdout_events:
        record: dict[str, Any] = {"ts": round(time.time(), 6), "event": name}
        if binding:
            record["binding"] = binding
        if _attributes:
            record["attributes"] = _attributes
        record.update((k, _bounded(v)) if isinstance(v, str) else (k, v) for k, v in fields.items())
        line = json.dumps(record, default=str, separators=(",", ":"))
        try:
            _out.write(line + "\n")
            _out.flush()
        except (OSError, ValueError):
            pass
        if _stdout_sinks and (level >= logging.WARNING or logger.isEnabledFor(level)):
            for sink in _stdout_sinks:
                sink(level, line)
    elif level >= logging.WARNING or logger.isEnabledFor(level):
        detail = " ".join(f"{k}={_bounded(str(v))}" for k, v in fields.items())
        where = f" [{binding}]" if binding else ""
        logger.log(level, "%s%s %s", name, where, detail)


def _bounded(text: str) -> str:
    if len(text) <= MAX_FIELD_CHARS:
        return text
    return f"{text[:MAX_FIELD_CHARS]}...({len(text)} characters)"


def warning(name: str, *, binding: str = "", **fields: Any) -> None:
    event(name, binding=binding, level=logging.WARNING, **fields)


def error(name: str, *, binding: str = "", **fields: Any) -> None:
    event(name, binding=binding, level=logging.ERROR, **fields)

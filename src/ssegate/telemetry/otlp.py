"""The ``otlp`` exporter: metrics and log events sent to an OpenTelemetry collector over
OTLP/HTTP (protobuf), every ``options.interval`` seconds.

:func:`otlp_options` reads the options (``validate`` runs it too): ``interval`` (seconds, 30 by
default), ``signals`` (``metrics`` and ``logs`` by default; ``traces`` too when named),
``traces.sampling`` (the share of Kafka records whose delivery is traced, :mod:`~.traces`;
:data:`~.traces.DEFAULT_SAMPLING` by default, refused unless ``traces`` is a signal),
``endpoint.location`` (an ``http://`` or ``https://`` URL) and ``endpoint.overrides`` (each
signal's path, ``/v1/metrics``, ``/v1/logs`` and ``/v1/traces`` by default, resolved against
the location as a link is: a path replaces the location's path).

:class:`OtlpExporter` is the asyncio edge. The log events it sends are those the ``ssegate``
logger passes on (``--log-level``: warnings and errors by default), caught by a logging handler
(and, with a ``stdout`` exporter, which writes events without the logger, as their JSON lines)
into a bounded :class:`~ssegate.telemetry.otlp_messages.LogRecordBuffer`: catching one is an
append. Every interval, one task reads the metrics and takes the buffered events into protobuf
requests on the loop, then posts them from a worker thread, one export at a time; the next
interval starts when that export has ended. A collector that is down or slow costs the gateway
a failed post (counted in ``ssegate.otlp.exports.failed{exporter,signal,reason}``), the log
events of that export and those the full buffer refused (``ssegate.otlp.log_records.dropped``),
and at most one warning line per interval; never a blocked loop or a growing queue. Metrics are
cumulative, so the next export that arrives carries what a failed one would have. Traced
deliveries wait in a bounded :class:`~.traces.SpanBuffer` the same way (drops, and the spans of
a failed export, counted in ``ssegate.otlp.deliveries.dropped``) and become spans at export time
(:mod:`~.otlp_traces`).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import logging
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from ssegate.config.errors import ConfigError
from ssegate.config.model import Component
from ssegate.telemetry import log
from ssegate.telemetry.metrics import Metrics
from ssegate.telemetry.otlp_messages import (
    LogEvent,
    LogRecordBuffer,
    logs_request,
    metrics_request,
    resource,
)
from ssegate.telemetry.otlp_traces import traces_request
from ssegate.telemetry.selection import MetricSelection
from ssegate.telemetry.traces import DEFAULT_SAMPLING, DELIVERY, SpanBuffer

DEFAULT_INTERVAL = 30.0
DEFAULT_PATHS = {"metrics": "/v1/metrics", "logs": "/v1/logs", "traces": "/v1/traces"}
DEFAULT_SIGNALS = ("metrics", "logs")
LOG_BUFFER_CAPACITY = 4096
"""Log events held for the next export; more are dropped and counted."""
EXPORT_TIMEOUT = 10.0
"""Seconds one post may take (capped at the interval)."""
CLOSE_TIMEOUT = 2.0
"""Seconds the last export, on stop, may take."""
CONTENT_TYPE = "application/x-protobuf"


@dataclass(frozen=True, slots=True)
class OtlpOptions:
    """What an ``otlp`` exporter does: where each signal goes, and how often."""

    interval: float
    urls: Mapping[str, str]
    """Signal (``metrics``, ``logs``, ``traces``) → the URL its requests are posted to."""
    sampling: float = 0.0
    """The share of records whose delivery is traced (0 unless ``traces`` is a signal)."""


def otlp_options(component: Component) -> OtlpOptions:
    """The options of an ``otlp`` exporter. Raises ConfigError naming the option."""
    where = f"{component.path or f'telemetry.exporters.{component.name}'}.options"
    options = component.options
    interval = float(options.get("interval", DEFAULT_INTERVAL))  # the schema makes it >= 1
    endpoint = options.get("endpoint") or {}
    location = str(endpoint.get("location", ""))
    if not _is_http_url(location):
        raise ConfigError(
            f"{where}.endpoint.location", f"'{location}' is not an http:// or https:// URL"
        )
    overrides = endpoint.get("overrides") or {}
    urls = {}
    for signal in options.get("signals", DEFAULT_SIGNALS):
        path = str(overrides.get(signal, DEFAULT_PATHS[signal]))
        if not (path.startswith("/") or _is_http_url(path)):
            raise ConfigError(
                f"{where}.endpoint.overrides.{signal}",
                f"'{path}' is neither a path starting with / nor an http:// or https:// URL",
            )
        urls[signal] = urljoin(location, path)
    traces = options.get("traces")
    if traces is not None and "traces" not in urls:
        raise ConfigError(f"{where}.traces", "traces are not among this exporter's signals")
    sampling = float((traces or {}).get("sampling", DEFAULT_SAMPLING))  # the schema: 0..1
    return OtlpOptions(interval, urls, sampling if "traces" in urls else 0.0)


def _is_http_url(text: str) -> bool:
    parts = urlsplit(text)
    return parts.scheme in ("http", "https") and bool(parts.hostname)


class ExportFailed(Exception):
    """A post the collector did not accept: ``reason`` is what the metric counts (``status
    503``, ``unreachable``, ``timeout``), the message what the log line says."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


def post(url: str, body: bytes, timeout: float) -> None:
    """POST ``body`` as OTLP/HTTP protobuf to ``url``. Raises ExportFailed; blocks (run it in
    a thread)."""
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"content-type": CONTENT_TYPE}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()
    except urllib.error.HTTPError as exc:
        raise ExportFailed(
            f"status {exc.code}", f"{url} answered {exc.code} {exc.reason}"
        ) from None
    except TimeoutError:
        raise ExportFailed("timeout", f"{url} did not answer within {timeout:g} s") from None
    except http.client.HTTPException as exc:
        raise ExportFailed("bad answer", f"{url}: {exc!r}") from None
    except (urllib.error.URLError, OSError) as exc:
        why = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        if isinstance(why, TimeoutError):
            raise ExportFailed("timeout", f"{url} did not answer within {timeout:g} s") from None
        raise ExportFailed("unreachable", f"{url}: {why}") from None


class LogEventCapture(logging.Handler):
    """A logging handler that keeps every record it is handed in a buffer, as a LogEvent."""

    def __init__(self, buffer: LogRecordBuffer) -> None:
        super().__init__()
        self.buffer = buffer

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = record.getMessage()
        except (TypeError, ValueError):
            line = str(record.msg)
        self.buffer.append(LogEvent(int(record.created * 1e9), record.levelno, line))

    def event(self, level: int, line: str) -> None:
        """An event the ``stdout`` exporter wrote (its JSON line), which no logger record
        carries (:func:`~ssegate.telemetry.log.add_stdout_sink`)."""
        self.buffer.append(LogEvent(time.time_ns(), level, line))


class OtlpExporter:
    """One ``otlp`` exporter of one process: started by :meth:`start`, stopped by
    :meth:`close`, which sends what is left once more."""

    def __init__(
        self,
        name: str,
        options: OtlpOptions,
        metrics: Metrics,
        *,
        attributes: Mapping[str, str] | None = None,
        selection: MetricSelection | None = None,
    ) -> None:
        self.name = name
        self.options = options
        self.metrics = metrics
        self.selection = selection
        self.buffer = LogRecordBuffer(LOG_BUFFER_CAPACITY)
        self._resource = resource(attributes or {}, os.getpid())
        self._start_ns = time.time_ns()
        self._capture: LogEventCapture | None = None
        self.spans: SpanBuffer | None = None
        """Traced deliveries waiting for the next export (when ``traces`` is a signal)."""
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Catch log events (when ``logs`` is a signal) and export every interval."""
        if "logs" in self.options.urls:
            self._capture = LogEventCapture(self.buffer)
            log.logger.addHandler(self._capture)
            log.add_stdout_sink(self._capture.event)
        if "traces" in self.options.urls and self.options.sampling > 0:
            self.spans = DELIVERY.attach(self.options.sampling, self.metrics)
        self._task = asyncio.get_running_loop().create_task(self._every_interval())

    async def _every_interval(self) -> None:
        while True:
            await asyncio.sleep(self.options.interval)
            await self.export()

    async def export(self, timeout: float | None = None) -> None:
        """Send the metrics as they stand and the buffered log events, once; count and log
        what did not arrive."""
        requests: list[tuple[str, str, bytes, int]] = []  # signal, url, body, log events
        metrics_url = self.options.urls.get("metrics")
        if metrics_url is not None:
            request = metrics_request(
                self.metrics,
                self._resource,
                start_ns=self._start_ns,
                now_ns=time.time_ns(),
                selection=self.selection,
            )
            requests.append(("metrics", metrics_url, request.SerializeToString(), 0))
        logs_url = self.options.urls.get("logs")
        events = self.buffer.take() if logs_url is not None else []
        if logs_url is not None and events:
            body = logs_request(events, self._resource).SerializeToString()
            requests.append(("logs", logs_url, body, len(events)))
        traces_url = self.options.urls.get("traces")
        records = self.spans.take() if self.spans is not None else []
        if traces_url is not None and records:
            body = traces_request(records, self._resource).SerializeToString()
            requests.append(("traces", traces_url, body, len(records)))
        limit = min(self.options.interval, EXPORT_TIMEOUT) if timeout is None else timeout
        failures = await _in_daemon_thread(lambda: _post_each(requests, limit)) if requests else {}
        self._account(failures, requests)

    def _account(
        self, failures: dict[str, ExportFailed], requests: list[tuple[str, str, bytes, int]]
    ) -> None:
        dropped = self.buffer.take_dropped()
        spans_dropped = self.spans.take_dropped() if self.spans is not None else 0
        for signal, _, _, events in requests:
            failed = failures.get(signal)
            if failed is not None and signal == "traces":
                spans_dropped += events
            elif failed is not None:
                dropped += events
            if failed is not None:
                self.metrics.inc(
                    "ssegate.otlp.exports.failed",
                    exporter=self.name,
                    signal=signal,
                    reason=failed.reason,
                )
        if dropped:
            self.metrics.inc("ssegate.otlp.log_records.dropped", value=dropped, exporter=self.name)
        if spans_dropped:
            self.metrics.inc(
                "ssegate.otlp.deliveries.dropped", value=spans_dropped, exporter=self.name
            )
        if failures:
            log.warning(
                "otlp.export_failed",
                exporter=self.name,
                failures="; ".join(f"{signal}: {exc}" for signal, exc in failures.items()),
                log_records_dropped=dropped,
                **({"deliveries_dropped": str(spans_dropped)} if self.spans is not None else {}),
            )
        elif dropped:
            log.warning(
                "otlp.log_records_dropped",
                exporter=self.name,
                dropped=dropped,
                capacity=self.buffer.capacity,
            )
        if spans_dropped and not failures and self.spans is not None:
            log.warning(
                "otlp.deliveries_dropped",
                exporter=self.name,
                dropped=spans_dropped,
                capacity=self.spans.capacity,
            )

    async def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Stop exporting; send what is left once more, for at most ``timeout`` seconds."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._capture is not None:
            log.logger.removeHandler(self._capture)
            log.remove_stdout_sink(self._capture.event)
            self._capture = None
        if self.spans is not None:
            DELIVERY.detach(self.spans)  # what it holds goes out with the last export
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.export(timeout), timeout)


def _post_each(
    requests: list[tuple[str, str, bytes, int]], timeout: float
) -> dict[str, ExportFailed]:
    """Post every request in turn; the ones that failed, by signal."""
    failures: dict[str, ExportFailed] = {}
    for signal, url, body, _ in requests:
        try:
            post(url, body, timeout)
        except ExportFailed as exc:
            failures[signal] = exc
    return failures


async def _in_daemon_thread(work: Callable[[], dict[str, ExportFailed]]) -> dict[str, ExportFailed]:
    """What ``work`` returns, run in a thread of its own: a daemon, so a post still waiting on a
    slow collector never holds the process's exit."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[dict[str, ExportFailed]] = loop.create_future()

    def settle(result: dict[str, ExportFailed]) -> None:
        if not done.done():
            done.set_result(result)

    def run() -> None:
        result = work()
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
            loop.call_soon_threadsafe(settle, result)

    threading.Thread(target=run, name="otlp-export", daemon=True).start()
    return await done


def start_otlp(
    metrics: Metrics,
    component: Component,
    *,
    attributes: Mapping[str, str] | None = None,
    selection: MetricSelection | None = None,
) -> OtlpExporter:
    """Start exporter ``component`` on the running loop; the caller closes it. ``attributes``:
    the config's ``telemetry.attributes``; ``selection``: its ``telemetry.metrics``."""
    exporter = OtlpExporter(
        component.name,
        otlp_options(component),
        metrics,
        attributes=attributes,
        selection=selection,
    )
    exporter.start()
    log.event(
        "otlp.exporting",
        exporter=component.name,
        interval=exporter.options.interval,
        metrics=exporter.options.urls.get("metrics", "-"),
        logs=exporter.options.urls.get("logs", "-"),
        traces=exporter.options.urls.get("traces", "-"),
        sampling=exporter.options.sampling,
    )
    return exporter

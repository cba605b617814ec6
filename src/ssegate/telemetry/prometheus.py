"""The ``prometheus`` exporter: the metrics in text exposition format 0.0.4, over HTTP/1.1.

:func:`render` is pure: Zilla's dotted names become underscores (``stream.opens.received`` →
``stream_opens_received_total``; counters get ``_total``), one ``# TYPE`` line per family,
label values escaped, histograms as cumulative ``_bucket{le=...}`` series with ``_sum`` and
``_count``; Zilla metrics the config's ``telemetry.metrics`` do not ask for are left out
(:mod:`ssegate.telemetry.selection`). :class:`PrometheusEndpoint` is the asyncio edge: it
answers ``GET <path>`` (and ``HEAD``) with the rendering and anything else with 404 (405 for
another method on the path).

Each worker process serves its own metrics; with several workers sharing a port, a scrape
reads the worker the kernel hands the connection to.
"""

from __future__ import annotations

import asyncio
import math
import re
from typing import Any, cast

import httptools

from ssegate.config.errors import ConfigError
from ssegate.config.model import Component
from ssegate.telemetry import log
from ssegate.telemetry.metrics import Histogram, Labels, Metrics
from ssegate.telemetry.selection import MetricSelection

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
DEFAULT_PATH = "/metrics"
_NAME_INVALID = re.compile(r"[^a-zA-Z0-9_:]")
_LABEL_INVALID = re.compile(r"[^a-zA-Z0-9_]")


def metric_name(name: str, kind: str) -> str:
    """The Prometheus name of metric ``name`` of ``kind`` (counter, gauge, histogram)."""
    text = _NAME_INVALID.sub("_", name)
    if text[:1].isdigit():
        text = f"_{text}"
    if kind == "counter" and not text.endswith("_total"):
        text += "_total"
    return text


def format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(labels: Labels, extra: tuple[tuple[str, str], ...] = ()) -> str:
    items = [*labels, *extra]
    if not items:
        return ""
    inner = ",".join(f'{_LABEL_INVALID.sub("_", k)}="{_escape(v)}"' for k, v in items)
    return f"{{{inner}}}"


def render(metrics: Metrics, selection: MetricSelection | None = None) -> str:
    """Every series of ``metrics`` in the text format, families in name order per kind; with
    ``selection``, only the Zilla metrics the config's ``telemetry.metrics`` ask for."""
    lines: list[str] = []
    typed: set[str] = set()
    for kind, name, labels, value in metrics.items():
        if selection is not None and not selection.exports(name, dict(labels).get("binding", "")):
            continue
        family = metric_name(name, kind)
        if family not in typed:
            typed.add(family)
            lines.append(f"# TYPE {family} {kind}")
        if isinstance(value, Histogram):
            lines.extend(_histogram_lines(family, labels, value))
        else:
            lines.append(f"{family}{_labels(labels)} {format_value(value)}")
    return "\n".join(lines) + "\n" if lines else ""


def _histogram_lines(family: str, labels: Labels, hist: Histogram) -> list[str]:
    lines = []
    cumulative = 0
    for bound, count in zip(hist.buckets, hist.counts, strict=False):
        cumulative += count
        le = _labels(labels, (("le", repr(float(bound))),))
        lines.append(f"{family}_bucket{le} {cumulative}")
    lines.append(f"{family}_bucket{_labels(labels, (('le', '+Inf'),))} {hist.count}")
    lines.append(f"{family}_sum{_labels(labels)} {format_value(hist.total)}")
    lines.append(f"{family}_count{_labels(labels)} {hist.count}")
    return lines


class PrometheusEndpoint(asyncio.Protocol):
    """One HTTP/1.1 connection to the metrics endpoint (keep-alive, one request at a time)."""

    def __init__(
        self, metrics: Metrics, path: str, selection: MetricSelection | None = None
    ) -> None:
        self.metrics = metrics
        self.path = path
        self.selection = selection
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.url = b""

    def connection_made(self, base: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but behave as one.
        transport = cast(asyncio.Transport, base)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._respond(400, b"upgrade is not supported\n", keep_alive=False)
        except httptools.HttpParserError as exc:
            log.event("prometheus.bad_request", reason=str(exc))
            self._respond(400, b"bad request\n", keep_alive=False)

    # httptools callbacks
    def on_message_begin(self) -> None:
        self.url = b""

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_message_complete(self) -> None:
        method = self.parser.get_method()
        keep_alive = bool(self.parser.should_keep_alive())
        path = httptools.parse_url(self.url).path.decode("latin-1") if self.url else ""
        if path != self.path:
            self._respond(404, b"not found\n", keep_alive=keep_alive)
        elif method not in (b"GET", b"HEAD"):
            self._respond(405, b"method not allowed\n", keep_alive, ("allow", "GET, HEAD"))
        else:
            body = render(self.metrics, self.selection).encode()
            self._respond(
                200, body, keep_alive, ("content-type", CONTENT_TYPE), head=method == b"HEAD"
            )

    def _respond(
        self,
        status: int,
        body: bytes,
        keep_alive: bool,
        *headers: tuple[str, str],
        head: bool = False,
    ) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}
        lines = [f"HTTP/1.1 {status} {reason[status]}", f"content-length: {len(body)}"]
        if not any(name == "content-type" for name, _ in headers):
            lines.append("content-type: text/plain; charset=utf-8")
        lines.extend(f"{name}: {value}" for name, value in headers)
        if not keep_alive:
            lines.append("connection: close")
        head_bytes = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self.transport.write(head_bytes if head else head_bytes + body)
        if not keep_alive:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None


def endpoints(component: Component) -> list[tuple[int, str]]:
    """``(port, path)`` of each ``options.endpoints[]`` entry. Raises ConfigError."""
    where = f"{component.path or f'telemetry.exporters.{component.name}'}.options.endpoints"
    raw = component.options.get("endpoints")
    if not raw:  # the schema lets the option out
        raise ConfigError(where, "a prometheus exporter needs at least one endpoint")
    found = []
    for index, entry in enumerate(raw):
        at = f"{where}[{index}]"
        port = entry["port"]  # the schema bounds it, but its integers take 8080.0 too
        if not isinstance(port, int):
            raise ConfigError(f"{at}.port", f"{port!r} is not a port")
        path = str(entry.get("path", DEFAULT_PATH))
        if not path.startswith("/"):
            raise ConfigError(f"{at}.path", f"'{path}' must start with /")
        found.append((port, path))
    return found


async def start_prometheus(
    metrics: Metrics,
    component: Component,
    *,
    reuse_port: bool,
    host: str = "0.0.0.0",
    selection: MetricSelection | None = None,
) -> list[asyncio.Server]:
    """Listen on every endpoint of the exporter; the caller closes the servers. ``selection``:
    the config's ``telemetry.metrics`` (:mod:`ssegate.telemetry.selection`)."""
    loop = asyncio.get_running_loop()
    servers: list[asyncio.Server] = []
    for port, path in endpoints(component):
        try:
            server = await loop.create_server(
                lambda path=path: PrometheusEndpoint(metrics, path, selection),
                host,
                port,
                reuse_port=reuse_port or None,
            )
        except OSError as exc:
            for opened in servers:
                opened.close()
            raise ConfigError(
                f"telemetry.exporters.{component.name}.options.endpoints",
                f"cannot listen on {host}:{port}: {exc.strerror or exc}",
            ) from None
        servers.append(server)
        for sock in server.sockets:
            bound: Any = sock.getsockname()
            log.event("prometheus.listen", host=bound[0], port=bound[1], path=path)
    return servers

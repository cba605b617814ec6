"""The ``sse`` client binding: proxies each downstream SSE stream to one upstream SSE server.

:class:`SseClient` is an :class:`~ssegate.bindings.sse.source.SseSource`. Every subscription
opens one upstream ``GET`` through the ``http`` client exit, with the downstream request's path
(its query minus ``lastEventId``) and authority, ``accept: text/event-stream``,
``cache-control: no-cache`` and ``last-event-id`` when one is known. The body is read like a
browser reads it (:class:`~ssegate.sse.parser.SseParser`) and relayed event by event: the id
is written only when it moved, id-only blocks are relayed as such, comments and ``retry`` are
not relayed (the sse server writes its own).

Before the downstream is open, anything but ``200 text/event-stream`` (or an unreachable
upstream) is answered ``502``. Once open, the downstream never notices the upstream going
away: the subscription reconnects with the last id it saw, after a delay that starts at the
upstream's ``retry`` (else the binding's ``retry`` option, default 2000 ms; when neither was
set the first delay is capped at 500 ms so a restart is bridged quickly), doubles on every
failed attempt up to 30 s, and is jittered down by up to half. On a reconnect, ``204`` ends the
downstream cleanly, ``5xx`` and connection failures are retried, anything else closes it.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from ssegate.bindings.http.client import ClientStream, HttpClient
from ssegate.bindings.sse.source import SseSink
from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding
from ssegate.engine.context import BuildContext
from ssegate.engine.exchange import Request
from ssegate.sse.parser import SseEvent, SseParseError, SseParser
from ssegate.telemetry import log
from ssegate.telemetry.metrics import Metrics

DEFAULT_RETRY_MS = 2000
FIRST_RETRY_CAP_MS = 500
MAX_BACKOFF_MS = 30_000

_FINAL, _RETRY = True, False


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def upstream_target(request: Request) -> str:
    """The downstream target with ``lastEventId`` taken out of its query (it goes in a header)."""
    query = request.query
    if not query:
        return request.path
    kept = [part for part in query.split("&") if part.split("=", 1)[0] != "lastEventId"]
    return request.path + ("?" + "&".join(kept) if kept else "")


class UpstreamSubscription:
    """One downstream stream's upstream connection, reconnected until cancelled."""

    def __init__(
        self, client: SseClient, request: Request, last_event_id: str | None, sink: SseSink
    ) -> None:
        self._client = client
        self._sink = sink
        self._target = upstream_target(request)
        self._authority = request.authority or None
        self._remote = request.remote
        self._parser = SseParser(last_event_id=last_event_id or "")
        self._relayed_id = last_event_id or ""
        self._opened = False
        self._accepted = False
        self._failures = 0
        self._finished: asyncio.Future[bool] | None = None
        self._stream: ClientStream | None = None
        self._cancelled = False
        self._task: asyncio.Task[None] | None = None

    @property
    def last_event_id(self) -> str:
        """The last id committed by the upstream (what a reconnect sends)."""
        return self._parser.last_event_id

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def cancel(self) -> None:
        if self._cancelled:
            return
        self._cancelled = True
        self._client.forget(self)
        if self._stream is not None:
            self._stream.cancel()
            self._stream = None
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()

    # -- the reconnect loop -----------------------------------------------------------------

    async def _run(self) -> None:
        try:
            while not self._cancelled:
                if await self._attempt() is _FINAL or self._cancelled:
                    break
                delay = self._next_delay()
                log.event(
                    "sse.upstream_reconnect",
                    binding=self._client.name,
                    delay_ms=round(delay * 1000),
                    last_event_id=self._parser.last_event_id,
                )
                self._client.metrics.inc("ssegate.sse.upstream_reconnects", self._client.name)
                await asyncio.sleep(delay)
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # never leave a downstream hanging on a bug
            log.error("sse.upstream_failed", binding=self._client.name, error=repr(exc))
            self._sink.fail(502, "upstream failed")
        finally:
            self._client.forget(self)

    def _next_delay(self) -> float:
        client = self._client
        upstream_retry = self._parser.retry
        base = upstream_retry if upstream_retry is not None else client.retry_ms
        delay = min(MAX_BACKOFF_MS, base << min(16, max(0, self._failures - 1)))
        if self._failures <= 1 and upstream_retry is None and not client.retry_configured:
            delay = min(delay, FIRST_RETRY_CAP_MS)
        return delay * random.uniform(0.5, 1.0) / 1000

    async def _attempt(self) -> bool:
        """One upstream connection, to its end. Returns whether the subscription is over."""
        self._failures += 1
        self._accepted = False
        self._finished = asyncio.get_running_loop().create_future()
        headers = [("accept", "text/event-stream"), ("cache-control", "no-cache")]
        if self._parser.last_event_id:
            headers.append(("last-event-id", self._parser.last_event_id))
        try:
            stream = await self._client.http.open_stream(
                "GET",
                self._target,
                headers,
                authority=self._authority,
                on_response=self._on_response,
                on_data=self._on_data,
                on_end=self._on_end,
                on_error=self._on_error,
            )
        except OSError as exc:
            return self._upstream_lost(f"upstream unreachable: {exc}")
        if self._cancelled:
            stream.cancel()
            return _FINAL
        self._stream = stream
        return await self._finished

    def _settle(self, final: bool) -> None:
        if self._finished is not None and not self._finished.done():
            self._finished.set_result(final)

    def _upstream_lost(self, reason: str) -> bool:
        self._parser.close()
        if not self._opened:
            self._sink.fail(502, reason)
            return _FINAL
        log.event("sse.upstream_lost", binding=self._client.name, reason=reason)
        return _RETRY

    # -- http client callbacks ----------------------------------------------------------------

    def _on_response(self, status: int, headers: dict[str, str]) -> None:
        content_type = headers.get("content-type", "")
        if status == 200 and _media_type(content_type) == "text/event-stream":
            self._accepted = True
            self._failures = 0
            if not self._opened:
                self._opened = True
                self._sink.open()
            return
        self._drop_stream()
        if status == 200:
            reason = f"upstream content type '{content_type}' is not text/event-stream"
        else:
            reason = f"upstream answered {status}"
        log.warning("sse.upstream_refused", binding=self._client.name, reason=reason)
        self._client.metrics.inc("stream.errors.received", self._client.name)
        if not self._opened:
            self._sink.fail(502, reason)
            self._settle(_FINAL)
        elif status == 204:
            self._sink.end()
            self._settle(_FINAL)
        elif 500 <= status < 600:
            self._settle(_RETRY)
        else:
            self._sink.fail(502, reason)
            self._settle(_FINAL)

    def _on_data(self, data: bytes) -> None:
        if not self._accepted:
            return
        try:
            items = self._parser.feed(data)
        except SseParseError as exc:
            self._drop_stream()
            self._settle(self._upstream_lost(str(exc)))
            return
        sink = self._sink
        for item in items:
            moved = item.id != self._relayed_id
            self._relayed_id = item.id
            if isinstance(item, SseEvent):
                event_type = None if item.type == "message" else item.type
                sink.event(item.data, event=event_type, id=item.id if moved else None)
            else:
                sink.event(None, id=item.id)

    def _on_end(self) -> None:
        self._stream = None
        self._settle(self._upstream_lost("upstream ended the stream"))

    def _on_error(self, exc: Exception) -> None:
        self._stream = None
        self._settle(self._upstream_lost(f"upstream failed: {exc}"))

    def _drop_stream(self) -> None:
        if self._stream is not None:
            self._stream.cancel()
            self._stream = None


class SseClient:
    """The built ``sse`` client binding."""

    def __init__(
        self,
        name: str,
        http: HttpClient,
        metrics: Metrics,
        *,
        retry_ms: int = DEFAULT_RETRY_MS,
        retry_configured: bool = False,
    ) -> None:
        self.name = name
        self.http = http
        self.metrics = metrics
        self.retry_ms = retry_ms
        self.retry_configured = retry_configured
        self._live: set[UpstreamSubscription] = set()

    def subscribe(
        self, request: Request, last_event_id: str | None, sink: SseSink
    ) -> UpstreamSubscription:
        subscription = UpstreamSubscription(self, request, last_event_id, sink)
        self._live.add(subscription)
        subscription.start()
        return subscription

    def forget(self, subscription: UpstreamSubscription) -> None:
        self._live.discard(subscription)

    def close(self) -> None:
        """Cancel every upstream connection (at shutdown)."""
        for subscription in list(self._live):
            subscription.cancel()


def build(binding: Binding, ctx: BuildContext) -> SseClient:
    options: dict[str, Any] = binding.options
    retry = options.get("retry", DEFAULT_RETRY_MS)
    if isinstance(retry, bool) or not isinstance(retry, int) or retry < 0:
        raise ConfigError(f"{binding.path}.options.retry", f"{retry!r} is not milliseconds")
    if not binding.exit:
        raise ConfigError(f"{binding.path}.exit", "an sse client needs an http client exit")
    http = ctx.exit(binding.exit)
    if not isinstance(http, HttpClient):
        raise ConfigError(f"{binding.path}.exit", f"'{binding.exit}' is not an http client")
    return SseClient(
        binding.name, http, ctx.metrics, retry_ms=retry, retry_configured="retry" in options
    )

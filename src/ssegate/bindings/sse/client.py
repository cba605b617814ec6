"""The ``sse`` client binding: proxies downstream SSE streams to an upstream SSE server.

:class:`SseClient` is an :class:`~ssegate.bindings.sse.source.SseSource`. An
:class:`UpstreamSubscription` is one upstream ``GET`` through the ``http`` client exit, with
the downstream request's path without its query string (as Zilla forwards it: the resume id
goes in ``last-event-id``, and credentials sent as ``?access_token=`` stay at the gateway), its
authority, ``accept: text/event-stream``, ``cache-control: no-cache`` and ``last-event-id``
when one is known; no other downstream header is forwarded. The body is read like a browser
reads it (:class:`~ssegate.sse_codec.parser.SseParser`), each event is encoded once and written to
every downstream stream reading that upstream (:mod:`ssegate.bindings.sse.upstream`): the id
is written only when it moved, id-only blocks are relayed as such, comments and ``retry`` are
not relayed (the sse server writes its own).

Sharing. Downstream requests that make the same upstream request (same path and authority)
share one upstream connection when their resume positions agree:

- a request without a last event id joins a subscription that was started without one (it is
  at the upstream's live head);
- a request with last event id ``X`` joins a subscription whose last relayed item set ``X``
  (or that started at ``X`` and relayed nothing yet);
- a subscription that is waiting to reconnect takes no one (a newcomer would not learn that the
  upstream is unreachable); neither does one that has ended.

Anyone else gets an upstream of their own, which replays from their id. Two subscriptions of
the same request merge as soon as one of them relays the item that set the id the other is at:
the other's streams are written what they missed and move over, and its upstream is closed.
So a client that resumes from an older id reads its own replay until it catches up, then shares.

Before the downstream is open, anything but ``200 text/event-stream`` (or an unreachable
upstream) is answered ``502``. Once open, the downstreams never notice the upstream going
away: where Zilla ends the downstream stream when the upstream ends its response (and every
browser reconnects on its own), the subscription re-requests the upstream once for all its
streams with the last id it saw. The re-requests of a dead or flapping upstream are bounded:
the delay starts at the upstream's ``retry`` (else the binding's ``retry`` option, else 1 s)
but never below :data:`RECONNECT_FLOOR_MS`, doubles with every further attempt in a row that
failed or whose stream ended within :data:`STABLE_SECONDS`, has up to half of it added at
random (so that subscriptions lost together do not come back together), and never exceeds
:data:`MAX_BACKOFF_MS`. A stream that lasted :data:`STABLE_SECONDS` starts the doubling over.
Each re-request is one ``sse.upstream_reconnect`` log line (delay, attempt, why the last one
ended) and a count in ``ssegate.sse.upstream_reconnects``. On a reconnect, ``204`` ends the
downstreams cleanly, ``5xx`` and connection failures are retried, anything else closes them.
A request the http client refuses to send (a header value it may not carry) is not retried: it
is answered ``400`` with the reason, or closes the downstreams once they are open.
The upstream connection closes when its last downstream stream goes away.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from ssegate.bindings.http.client import HTTP_CLIENT, ClientStream, HttpClient
from ssegate.bindings.http.request_head import RequestRefused
from ssegate.bindings.sse.source import SseSink
from ssegate.bindings.sse.upstream import FanoutMember, UpstreamFanout, UpstreamItem
from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding
from ssegate.contract.exchange import Request
from ssegate.engine.context import BuildContext
from ssegate.sse_codec.parser import SseParseError, SseParser
from ssegate.telemetry import log
from ssegate.telemetry.metrics import Metrics

DEFAULT_RETRY_MS = 2000
RECONNECT_FLOOR_MS = 1000
"""No upstream is re-requested sooner than this after its last request ended, ``retry:0`` or not."""
MAX_BACKOFF_MS = 30_000
STABLE_SECONDS = 30.0
"""An upstream stream that lasted this long was not flapping: the next delay starts over."""

_FINAL, _RETRY = True, False

UpstreamKey = tuple[str, str | None]
"""What makes two upstream requests the same: the path and the authority."""


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def reconnect_delay(attempt: int, retry_ms: int, jitter: float) -> float:
    """Seconds before re-request number ``attempt`` in a row of an upstream whose ``retry`` is
    ``retry_ms``: at least the floor, doubled per attempt after the first, ``jitter`` (0 to 1)
    of half of it added, at most the cap."""
    doubled = max(RECONNECT_FLOOR_MS, retry_ms) << min(16, max(0, attempt - 1))
    return min(MAX_BACKOFF_MS, doubled * (1 + jitter / 2)) / 1000


class UpstreamSubscription:
    """One upstream connection, reconnected until its last downstream stream goes away."""

    def __init__(self, client: SseClient, key: UpstreamKey, last_event_id: str | None) -> None:
        self._client = client
        self.key = key
        self.from_live_head = last_event_id is None
        """Started without a resume id: requests without one may join."""
        self.fanout = UpstreamFanout(last_event_id or "", self.cancel)
        self._parser = SseParser(last_event_id=last_event_id or "")
        self._accepted = False
        self._accepted_at: float | None = None
        """When the current attempt's upstream answered ``200`` (None: it has not)."""
        self._attempts = 0
        """Attempts in a row that failed or whose stream ended within ``STABLE_SECONDS``."""
        self._lost_because = ""
        self._finished: asyncio.Future[bool] | None = None
        self._stream: ClientStream | None = None
        self._cancelled = False
        self._task: asyncio.Task[None] | None = None

    @property
    def last_event_id(self) -> str:
        """The last id committed by the upstream (what a reconnect sends)."""
        return self._parser.last_event_id

    @property
    def connected(self) -> bool:
        """The upstream answered ``200 text/event-stream`` and is being read."""
        return self._accepted and not self._cancelled

    def takes(self, last_event_id: str | None) -> bool:
        """Whether a downstream resuming from ``last_event_id`` may join (the sharing rules)."""
        fanout = self.fanout
        if self._cancelled or fanout.closed or (fanout.opened and not self._accepted):
            return False
        if last_event_id is None:
            return self.from_live_head
        return fanout.exact and fanout.relayed_id == last_event_id

    def join(self, sink: SseSink, last_event_id: str | None) -> FanoutMember:
        return self.fanout.add(sink, last_event_id or "")

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
            loop = asyncio.get_running_loop()
            while not self._cancelled:
                self._accepted_at = None
                if await self._attempt() is _FINAL or self._cancelled:
                    break
                accepted_at = self._accepted_at
                if accepted_at is not None and loop.time() - accepted_at >= STABLE_SECONDS:
                    self._attempts = 0
                self._attempts += 1
                delay = self._next_delay()
                log.event(
                    "sse.upstream_reconnect",
                    binding=self._client.name,
                    delay_ms=round(delay * 1000),
                    attempt=self._attempts,
                    reason=self._lost_because,
                    last_event_id=self._parser.last_event_id,
                    streams=len(self.fanout),
                )
                self._client.metrics.inc("ssegate.sse.upstream_reconnects", self._client.name)
                await asyncio.sleep(delay)
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # never leave a downstream hanging on a bug
            log.error("sse.upstream_failed", binding=self._client.name, error=repr(exc))
            self.fanout.fail(502, "upstream failed")
        finally:
            self._client.forget(self)

    def _next_delay(self) -> float:
        client = self._client
        retry_ms = self._parser.retry
        if retry_ms is None:
            retry_ms = client.retry_ms if client.retry_configured else RECONNECT_FLOOR_MS
        return reconnect_delay(self._attempts, retry_ms, random.random())

    async def _attempt(self) -> bool:
        """One upstream connection, to its end. Returns whether the subscription is over."""
        self._accepted = False
        self._finished = asyncio.get_running_loop().create_future()
        headers = [("accept", "text/event-stream"), ("cache-control", "no-cache")]
        if self._parser.last_event_id:
            headers.append(("last-event-id", self._parser.last_event_id))
        target, authority = self.key
        try:
            stream = await self._client.http.open_stream(
                "GET",
                target,
                headers,
                authority=authority,
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
        self._lost_because = reason
        self._accepted = False
        self._parser.close()
        if not self.fanout.opened:
            self.fanout.fail(502, reason)
            return _FINAL
        log.event("sse.upstream_lost", binding=self._client.name, reason=reason)
        return _RETRY

    # -- http client callbacks ----------------------------------------------------------------

    def _on_response(self, status: int, headers: dict[str, str]) -> None:
        content_type = headers.get("content-type", "")
        if status == 200 and _media_type(content_type) == "text/event-stream":
            self._accepted = True
            self._accepted_at = asyncio.get_running_loop().time()
            if not self.fanout.opened:
                self.fanout.open()
            return
        self._drop_stream()
        if status == 200:
            reason = f"upstream content type '{content_type}' is not text/event-stream"
        else:
            reason = f"upstream answered {status}"
        log.warning("sse.upstream_refused", binding=self._client.name, reason=reason)
        self._client.metrics.inc("stream.errors.received", self._client.name)
        if not self.fanout.opened:
            self.fanout.fail(502, reason)
            self._settle(_FINAL)
        elif status == 204:
            self.fanout.end()
            self._settle(_FINAL)
        elif 500 <= status < 600:
            self._lost_because = reason
            self._settle(_RETRY)
        else:
            self.fanout.fail(502, reason)
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
        if not items:
            return
        blocks, marks = self.fanout.deliver(items)
        if not self._cancelled and self._client.shares_key(self):
            self._client.merge_into(self, items, blocks, marks)

    def _on_end(self) -> None:
        self._stream = None
        self._settle(self._upstream_lost("upstream ended the stream"))

    def _on_error(self, exc: Exception) -> None:
        self._stream = None
        if isinstance(exc, RequestRefused):
            self._accepted = False
            self.fanout.fail(exc.status, f"upstream request refused: {exc}")
            self._settle(_FINAL)
            return
        self._settle(self._upstream_lost(f"upstream failed: {exc}"))

    def _drop_stream(self) -> None:
        self._accepted = False
        if self._stream is not None:
            self._stream.cancel()
            self._stream = None


class SseClient:
    """The built ``sse`` client binding: its upstream subscriptions, by upstream request."""

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
        self._upstreams: dict[UpstreamKey, list[UpstreamSubscription]] = {}

    def subscribe(self, request: Request, last_event_id: str | None, sink: SseSink) -> FanoutMember:
        key: UpstreamKey = (request.path, request.authority or None)
        for subscription in self._upstreams.get(key, ()):
            if subscription.takes(last_event_id):
                self.metrics.inc("ssegate.sse.upstream_shared", self.name)
                return subscription.join(sink, last_event_id)
        subscription = UpstreamSubscription(self, key, last_event_id)
        self._upstreams.setdefault(key, []).append(subscription)
        member = subscription.join(sink, last_event_id)
        subscription.start()
        return member

    def upstreams(self) -> list[UpstreamSubscription]:
        """Every live upstream subscription."""
        return [s for group in self._upstreams.values() for s in group]

    def shares_key(self, subscription: UpstreamSubscription) -> bool:
        return len(self._upstreams.get(subscription.key, ())) > 1

    def merge_into(
        self,
        reader: UpstreamSubscription,
        items: list[UpstreamItem],
        blocks: list[bytes],
        marks: list[str | None],
    ) -> None:
        """After ``reader`` relayed ``items``: absorb every subscription of the same request
        whose position is the id one of these items set (it is behind or level with ``reader``).
        """
        for other in list(self._upstreams.get(reader.key, ())):
            fanout = other.fanout
            if other is reader or not other.connected or not fanout.exact:
                continue
            position = fanout.relayed_id
            if not position or position not in marks:
                continue
            after = len(marks) - marks[::-1].index(position)
            log.event(
                "sse.upstream_merged",
                binding=self.name,
                last_event_id=position,
                streams=len(fanout),
            )
            self.metrics.inc("ssegate.sse.upstream_merges", self.name)
            reader.from_live_head = reader.from_live_head or other.from_live_head
            reader.fanout.absorb(fanout, items[after:], blocks[after:])

    def forget(self, subscription: UpstreamSubscription) -> None:
        group = self._upstreams.get(subscription.key)
        if group is not None and subscription in group:
            group.remove(subscription)
            if not group:
                del self._upstreams[subscription.key]

    def close(self) -> None:
        """Cancel every upstream connection (at shutdown)."""
        for subscription in self.upstreams():
            subscription.cancel()


def build(binding: Binding, ctx: BuildContext) -> SseClient:
    options: dict[str, Any] = binding.options
    retry = options.get("retry", DEFAULT_RETRY_MS)
    if not isinstance(retry, int):  # the schema bounds it, but its integers take 5.0 too
        raise ConfigError(f"{binding.path}.options.retry", f"{retry!r} is not milliseconds")
    if not binding.exit:
        raise ConfigError(f"{binding.path}.exit", "an sse client needs an http client exit")
    http = ctx.exit(binding.exit, HTTP_CLIENT, f"{binding.path}.exit")
    return SseClient(
        binding.name, http, ctx.metrics, retry_ms=retry, retry_configured="retry" in options
    )

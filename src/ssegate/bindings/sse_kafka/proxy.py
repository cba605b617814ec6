"""The ``sse-kafka`` proxy binding: an :class:`~ssegate.bindings.sse.source.SseSource` on Kafka.

Per SSE request :class:`SseKafkaProxy` picks the first route whose ``when[].path`` pattern
matches the path (``{name}`` captures a parameter; a route without ``when`` matches every
path), checks the route's ``guarded`` (whose guards then keep the stream authorized, as on the
sse server's routes: :mod:`ssegate.guards.streams`), reads the client's last event id into a
start offset per partition, renders ``with.topic`` and ``with.filters`` for this request, and
subscribes a :class:`~ssegate.bindings.sse_kafka.subscriber.TopicSubscriber` to the route's
exit, a :class:`KafkaTopics` (the ``kafka`` cache_client; :data:`KAFKA_TOPICS`, checked when
the graph is built).

Answers before the stream starts:

- no route for the path → **404**; a guard refuses → **401**/**403**;
- a last event id that is not an sse-kafka id → **400** with the reason (Zilla silently
  replays the whole topic instead); the sse server already refuses ids over 254 bytes;
- a ``since`` query parameter that is not a time (:mod:`~.since`) → **400** with the reason
  (``ssegate.sse_kafka.bad_since``), whether or not a last event id comes with it;
- a topic that does not exist, or a rendered topic name Kafka cannot have → **404**;
- a ``since`` the broker's time index does not answer in time → **503**
  (:mod:`~.timed_start`).

``?since=<time>`` (an ssegate extension) starts each partition at its first record at or after
the time, through the same start offsets a last event id gives; a last event id wins over it.
A time in the future starts every partition live.

The events' ``data:`` is the topic's value view when the exit has one
(:meth:`KafkaTopics.value_text`, asked once per subscription): e.g. an ``avro`` value with
``view: json`` reaches the client as JSON text.

Partitions named in the id resume at their next offset; the others start where the cache's
default for the topic says (``historical`` unless the cache is told otherwise).

A route without ``with`` whose path captures ``{topic}`` reads the topic from it (Zilla leaves
the topic unset there); a route without ``with`` and without ``{topic}`` is a config error.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ssegate.bindings.http.routing import Pattern
from ssegate.bindings.sse.source import SseSink, Subscription
from ssegate.bindings.sse_kafka.broadcast import Broadcasts
from ssegate.bindings.sse_kafka.event_id import (
    EventIdError,
    EventIdFormat,
    ProgressEncoder,
    progress_of_last_event_id,
)
from ssegate.bindings.sse_kafka.filters import FilterTemplate, MessageFilter
from ssegate.bindings.sse_kafka.shared import EncodedMessages, Shapes
from ssegate.bindings.sse_kafka.since import Since, SinceError, SinceStart, since_of
from ssegate.bindings.sse_kafka.subscriber import Shares, SubscriberStats, TopicSubscriber
from ssegate.bindings.sse_kafka.timed_start import TimedStart
from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding, Route
from ssegate.contract.exchange import Request
from ssegate.contract.guard import Guard
from ssegate.engine.context import BuildContext, ExitKind
from ssegate.engine.templates import MissingTemplateValue, Template
from ssegate.guards.guarded import AdmissionRecord, Guarded
from ssegate.kafka.times import TopicTimes
from ssegate.kafka.topics import DefaultOffset, TopicSource, UnknownTopic
from ssegate.models.topics import ValueView
from ssegate.telemetry import log
from ssegate.telemetry.metrics import Metrics

_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


@runtime_checkable
class KafkaTopics(TopicSource, Protocol):
    """What an sse-kafka route exits to: a topic source that also says how each topic's values
    become SSE text (the kafka cache client, from its ``topics[].value`` models)."""

    def value_text(self, topic: str) -> ValueView | None:
        """``topic``'s value view, or ``None``: the value goes out as UTF-8 text."""


KAFKA_TOPICS: ExitKind[KafkaTopics] = ExitKind(KafkaTopics, "a kafka cache_client")


@dataclass(frozen=True, slots=True)
class SseKafkaRoute:
    """One route, compiled at start-up."""

    patterns: tuple[Pattern, ...]
    """Empty: every path matches."""
    topic: Template
    filters: FilterTemplate | None
    id_format: EventIdFormat
    source: KafkaTopics
    guarded: Guarded

    def match(self, path: str) -> dict[str, str] | None:
        if not self.patterns:
            return {}
        for pattern in self.patterns:
            params = pattern.match(path)
            if params is not None:
                return params
        return None


class _Refused:
    """The subscription of a request answered with an error: nothing to cancel."""

    def cancel(self) -> None:
        return

    def resume_id(self) -> str | None:
        return None

    def pace(self, stalled: bool) -> None:
        return

    def behind_since(self, stalled_since: float, now: float) -> float | None:
        return stalled_since


class SseKafkaProxy:
    """The built ``sse-kafka`` proxy binding."""

    def __init__(
        self,
        name: str,
        routes: list[SseKafkaRoute],
        metrics: Metrics,
        guards: dict[str, Guard] | None = None,
    ) -> None:
        self.name = name
        self.routes = routes
        self.guards = guards or {}
        """The built guards of the guarded routes, by name (they keep the streams authorized)."""
        self.metrics = metrics
        self.encoded = EncodedMessages(binding=name, metrics=metrics)
        self.shapes = Shapes()
        self.stats = SubscriberStats()
        self.shares = Shares(name, metrics, self.stats, self.encoded, self.shapes)
        self.broadcasts = Broadcasts()
        """Live streams in step, written as one (:mod:`~ssegate.bindings.sse_kafka.broadcast`)."""

    def subscribe(self, request: Request, last_event_id: str | None, sink: SseSink) -> Subscription:
        path = request.path
        for route in self.routes:
            params = route.match(path)
            if params is not None:
                return self._subscribe(route, params, request, last_event_id, sink)
        return self._refuse(sink, 404, f"no sse-kafka route for '{path}'", request)

    def _subscribe(
        self,
        route: SseKafkaRoute,
        params: dict[str, str],
        request: Request,
        last_event_id: str | None,
        sink: SseSink,
    ) -> Subscription:
        request, refusal = route.guarded.admit(request, self.guards)
        if refusal is not None:
            return self._refuse(sink, refusal.status, refusal.body(request), request)
        if route.guarded and isinstance(sink, AdmissionRecord):
            sink.admitted(request)
        start: dict[int, int] = {}
        if last_event_id is not None:
            try:
                start = progress_of_last_event_id(last_event_id)
            except EventIdError as exc:
                self.metrics.inc("ssegate.sse_kafka.bad_last_event_ids", self.name)
                return self._refuse(sink, 400, f"last event id: {exc.reason}", request)
        try:
            since = since_of(request.query, int(time.time() * 1000))
        except SinceError as exc:
            self.metrics.inc("ssegate.sse_kafka.bad_since", self.name)
            return self._refuse(sink, 400, f"since: {exc.reason}", request)
        try:
            topic = route.topic.render(params, request.identities)
            message_filter = (
                None if route.filters is None else route.filters.render(params, request.identities)
            )
        except MissingTemplateValue as exc:
            return self._refuse(sink, 403, str(exc), request)
        if not _TOPIC_NAME.fullmatch(topic):
            return self._refuse(sink, 404, f"'{topic}' is not a Kafka topic name", request)
        if since is not None and last_event_id is None:
            return self._since(route, topic, message_filter, since, request, sink)
        return self._start(route, topic, message_filter, start, request, sink)

    def _since(
        self,
        route: SseKafkaRoute,
        topic: str,
        message_filter: MessageFilter | None,
        since: Since,
        request: Request,
        sink: SseSink,
    ) -> Subscription:
        """Start from where ``since`` falls in each partition, once the broker says."""
        if since.future:
            return self._start(
                route, topic, message_filter, {}, request, sink, default="live", since=since
            )
        source = route.source
        if not isinstance(source, TopicTimes):
            return self._refuse(sink, 501, "since: this route's exit cannot look times up", request)

        def begin(plan: SinceStart) -> Subscription:
            return self._start(route, topic, message_filter, plan.start, request, sink,
                               since=since, before_retention=plan.before_retention)  # fmt: skip

        def refuse(status: int, reason: str) -> None:
            if status == 503:
                self.metrics.inc("ssegate.sse_kafka.since_lookups_failed", self.name)
            self._refuse(sink, status, reason, request)

        return TimedStart(
            lambda: source.offsets_for_time(topic, since.time_ms),
            topic=topic,
            begin=begin,
            refuse=refuse,
            binding=self.name,
        )

    def _start(
        self,
        route: SseKafkaRoute,
        topic: str,
        message_filter: MessageFilter | None,
        start: dict[int, int],
        request: Request,
        sink: SseSink,
        *,
        default: DefaultOffset | None = None,
        since: Since | None = None,
        before_retention: Mapping[int, int] | None = None,
    ) -> Subscription:
        """Subscribe ``sink`` to ``topic`` from ``start`` (partition → next offset); a
        ``since`` that falls before the retention of ``before_retention``'s partitions (→ their
        earliest offset) is said first, before any record."""
        subscriber = TopicSubscriber(
            sink,
            topic=topic,
            progress=ProgressEncoder(start),
            message_filter=message_filter,
            id_format=route.id_format,
            shares=self.shares,
            view=route.source.value_text(topic),
            broadcasts=self.broadcasts,
            source=route.source,
            default=default,
        )
        if since is not None:
            for partition, earliest in (before_retention or {}).items():
                subscriber.on_time_reset(partition, since.time_ms, earliest)
        try:
            subscription = route.source.subscribe(topic, start, subscriber, default=default)
        except UnknownTopic:
            subscriber.cancel()
            return self._refuse(sink, 404, f"topic '{topic}' does not exist", request)
        subscriber.topic_subscription = subscription
        if sink.closed:
            subscriber.cancel()
            return subscriber
        sink.open()
        self.metrics.inc("stream.opens.received", self.name)
        log.event(
            "sse_kafka.subscribed",
            binding=self.name,
            topic=topic,
            remote=request.remote,
            resumed=len(start),
            **({} if since is None else {"since": since.time_ms}),
        )
        return subscriber

    def _refuse(self, sink: SseSink, status: int, reason: str, request: Request) -> Subscription:
        log.warning(
            "sse_kafka.refused",
            binding=self.name,
            status=status,
            reason=reason,
            remote=request.remote,
        )
        self.metrics.inc("stream.errors.received", self.name)
        sink.fail(status, reason)
        return _Refused()


def _id_format(with_: dict[str, Any]) -> EventIdFormat:
    event = with_.get("event") or {}
    return EventIdFormat(event.get("id", EventIdFormat.ETAG.value))  # the schema's enum


def compile_route(route: Route, source: KafkaTopics, where: str) -> SseKafkaRoute:
    """Compile one route of an sse-kafka binding found at YAML path ``where``."""
    patterns = tuple(
        Pattern.compile(str(entry.get("path")), f"{where}.when[{index}].path")
        for index, entry in enumerate(route.when)
        if "path" in entry
    )
    captured = [set(p.params) for p in patterns]
    with_ = route.with_
    if with_ is None:
        if not patterns or not all("topic" in names for names in captured):
            raise ConfigError(
                f"{where}.with.topic", "is required unless every when.path captures {topic}"
            )
        with_ = {"topic": "${params.topic}"}
    topic = Template.compile(str(with_.get("topic")), f"{where}.with.topic")
    filters = FilterTemplate.compile(with_.get("filters"), f"{where}.with.filters")
    needed = topic.param_names | (filters.param_names if filters is not None else frozenset())
    for names, pattern in zip(captured, patterns, strict=True):
        missing = sorted(needed - names)
        if missing:
            raise ConfigError(
                f"{where}.with",
                f"uses ${{params.{missing[0]}}} but path '{pattern.text}' does not capture it",
            )
    if not patterns and needed:
        raise ConfigError(f"{where}.with", "uses ${params...} but the route has no when.path")
    guards = topic.guard_names | (filters.guard_names if filters is not None else frozenset())
    for guard in sorted(guards - set(route.guarded)):
        raise ConfigError(
            f"{where}.with", f"reads guard '{guard}' but the route is not guarded by it"
        )
    return SseKafkaRoute(
        patterns,
        topic,
        filters,
        _id_format(with_),
        source,
        Guarded.compile(route.guarded, f"{where}.guarded"),
    )


def build(binding: Binding, ctx: BuildContext) -> SseKafkaProxy:
    routes: list[SseKafkaRoute] = []
    for index, route in enumerate(binding.routes):
        where = route.path or f"{binding.path}.routes[{index}]"
        if not route.exit:
            raise ConfigError(f"{where}.exit", "an sse-kafka route needs an exit")
        source = ctx.exit(route.exit, KAFKA_TOPICS, f"{where}.exit")
        routes.append(compile_route(route, source, where))
    if binding.exit:
        where = f"{binding.path}.exit"
        fallback = Route(exit=binding.exit, path=where)
        routes.append(compile_route(fallback, ctx.exit(binding.exit, KAFKA_TOPICS, where), where))
    guards = {name: ctx.guard(name) for route in routes for name in route.guarded}
    return SseKafkaProxy(binding.name, routes, ctx.metrics, guards)

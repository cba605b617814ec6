"""The ``kafka`` cache_client binding: the :class:`~ssegate.kafka.topics.TopicSource` that an
``sse-kafka`` route exits to.

It delegates every subscription to the ``cache_server`` it exits to, so all cache clients of a
process share one fetch per topic partition. Its ``options.topics[]{name, key, value}`` models
are built once at start-up and used twice: handed to that cache server as message checks (run
once per message, in the fetch thread), and kept here as the topic's value view
(:meth:`KafkaCacheClient.value_text`: how a valid value becomes SSE event text, e.g. an ``avro``
record with ``view: json`` as JSON text).

It also answers where a time falls in a topic (:class:`~ssegate.kafka.times.TopicTimes`, the
``since`` of an sse-kafka stream) through a :class:`~.time_index.TimeIndex` on the cache
server's Kafka client: a short-lived consumer per lookup, off the loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ssegate.bindings.kafka.cache_server import KafkaCacheServer
from ssegate.bindings.kafka.time_index import TimeIndex
from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding
from ssegate.engine.context import BuildContext, ExitKind
from ssegate.kafka.times import PartitionTime
from ssegate.kafka.topics import DefaultOffset, TopicListener, TopicSubscription
from ssegate.models.topics import TopicModels, ValueView


@dataclass(slots=True)
class KafkaCacheClient:
    name: str
    server: KafkaCacheServer
    value_views: dict[str, ValueView] = field(default_factory=dict)
    """Topic name → its value model's view; topics without a ``value`` model are absent."""
    times: TimeIndex | None = None
    """Where times fall in topics (``since``); ``None``: on the server's client, when asked."""

    def subscribe(
        self,
        topic: str,
        start: Mapping[int, int],
        listener: TopicListener,
        *,
        default: DefaultOffset | None = None,
    ) -> TopicSubscription:
        """See :meth:`ssegate.kafka.topics.TopicSource.subscribe`; raises ``UnknownTopic``."""
        return self.server.subscribe(topic, start, listener, default=default)

    def holds(self, topic: str, start: Mapping[int, int]) -> bool:
        """See :meth:`ssegate.kafka.topics.TopicSource.holds`."""
        return self.server.holds(topic, start)

    def value_text(self, topic: str) -> ValueView | None:
        """How a (valid, non-null) value of ``topic`` becomes SSE event text, or ``None`` when
        the topic names no ``value`` model (the value is then sent as UTF-8 text)."""
        return self.value_views.get(topic)

    async def offsets_for_time(self, topic: str, time_ms: int) -> Mapping[int, PartitionTime]:
        """See :meth:`ssegate.kafka.times.TopicTimes.offsets_for_time`."""
        if self.times is None:
            self.times = TimeIndex(self.server.client)
        return await self.times.offsets_for_time(topic, time_ms)

    def close(self) -> None:
        """Stop the time lookups' threads; the cache server it exits to owns the fetch thread."""
        if self.times is not None:
            self.times.close()


CACHE_SERVER: ExitKind[KafkaCacheServer] = ExitKind(KafkaCacheServer, "a kafka cache_server")


def build(binding: Binding, ctx: BuildContext) -> KafkaCacheClient:
    if binding.exit is None:
        raise ConfigError(f"{binding.path}.exit", "a kafka cache_client exits to a cache_server")
    server = ctx.exit(binding.exit, CACHE_SERVER, f"{binding.path}.exit")
    where = f"{binding.path}.options.topics"
    views: dict[str, ValueView] = {}
    for index, entry in enumerate(binding.options.get("topics") or ()):
        # One build per topic for both uses, so the view reuses what validation decoded.
        models = TopicModels.build(entry, f"{where}[{index}]", ctx.catalogs)
        if models.key is not None or models.value is not None:
            server.add_check(models.topic, models.validate)
        if models.value is not None:
            views[models.topic] = models.value_text
    return KafkaCacheClient(binding.name, server, views)

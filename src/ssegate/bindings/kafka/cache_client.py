"""The ``kafka`` cache_client binding: the :class:`~ssegate.kafka.topics.TopicSource` that an
``sse-kafka`` route exits to.

It delegates every subscription to the ``cache_server`` it exits to, so all cache clients of a
process share one fetch per topic partition. Its ``options.topics[]{name, key, value}`` models
are handed to that cache server as message checks (run once per message, in the fetch thread).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ssegate.bindings.kafka.cache_server import KafkaCacheServer
from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding
from ssegate.engine.context import BuildContext
from ssegate.kafka.topics import DefaultOffset, TopicListener, TopicSubscription
from ssegate.models.topics import build_topic_checks


@dataclass(slots=True)
class KafkaCacheClient:
    name: str
    server: KafkaCacheServer

    def subscribe(
        self,
        topic: str,
        start: Mapping[int, int],
        listener: TopicListener,
        *,
        default: DefaultOffset = "historical",
    ) -> TopicSubscription:
        """See :meth:`ssegate.kafka.topics.TopicSource.subscribe`; raises ``UnknownTopic``."""
        return self.server.subscribe(topic, start, listener, default=default)

    def close(self) -> None:
        """Nothing of its own to stop: the cache server it exits to owns the fetch thread."""


def build(binding: Binding, ctx: BuildContext) -> KafkaCacheClient:
    if binding.exit is None:
        raise ConfigError(f"{binding.path}.exit", "a kafka cache_client exits to a cache_server")
    server = ctx.exit(binding.exit)
    if not isinstance(server, KafkaCacheServer):
        raise ConfigError(f"{binding.path}.exit", f"'{binding.exit}' is not a kafka cache_server")
    topics = list(binding.options.get("topics") or ())
    for topic, check in build_topic_checks(topics, f"{binding.path}.options.topics", ctx).items():
        server.add_check(topic, check)
    return KafkaCacheClient(binding.name, server)

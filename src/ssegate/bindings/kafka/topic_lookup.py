"""Whether a ``kafka`` cache_server may start a feed for a topic a subscriber asks for.

:class:`TopicLookup` answers :meth:`~.cache_server.KafkaCacheServer.subscribe` before it starts
a topic: a topic the cluster's latest list names (:class:`~.fetch_events.TopicsListed`, every
metadata refresh of the fetch) exists; any other is asked of the cluster once
(:meth:`~.fetcher.FetchThread.topic_exists`), and a refusal is remembered for
:data:`NEGATIVE_LOOKUP_SECONDS`, so a burst of subscribers to a missing topic costs one metadata
round trip and each gets :class:`~ssegate.kafka.topics.UnknownTopic` at once. A cluster that
cannot be asked is no refusal: the topic is started and waits for the broker like any other.

It also keeps the warning ``kafka.topic_missing`` (a started topic the fetch cannot find) to one
line per topic until that topic starts.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ssegate.bindings.kafka.fetch_events import TopicMissing
from ssegate.telemetry import log

NEGATIVE_LOOKUP_SECONDS = 1.0


class TopicLookup:
    """The topics cache server ``name`` knows, and those the cluster refused lately."""

    def __init__(self, name: str, topic_exists: Callable[[str], bool | None]) -> None:
        self.name = name
        self._topic_exists = topic_exists
        self._known_topics: frozenset[str] = frozenset()
        self._missing: dict[str, float] = {}
        self._warned_missing: set[str] = set()

    def exists(self, topic: str) -> bool:
        if topic in self._known_topics:
            return True
        refused_at = self._missing.get(topic)
        if refused_at is not None and time.monotonic() - refused_at < NEGATIVE_LOOKUP_SECONDS:
            return False
        found = self._topic_exists(topic)
        if found is False:
            self._missing[topic] = time.monotonic()
            return False
        return True  # found, or the broker cannot say now: wait for it like any subscriber

    def listed(self, names: frozenset[str]) -> None:
        """The cluster's latest metadata lists ``names``."""
        self._known_topics = names

    def missing(self, event: TopicMissing) -> None:
        """The fetch could not start ``event.topic``: warned once until it starts."""
        if event.topic not in self._warned_missing:
            self._warned_missing.add(event.topic)
            log.warning("kafka.topic_missing", binding=self.name, topic=event.topic,
                        reason=event.reason)  # fmt: skip

    def started(self, topic: str) -> None:
        self._warned_missing.discard(topic)

"""Models applied to Kafka topics: the ``key`` and ``value`` of a ``kafka`` ``topics[]`` entry.

:class:`TopicModels` holds a topic's two models. :meth:`TopicModels.validate` says whether a
:class:`~ssegate.kafka.topics.KafkaMessage` is valid (``None``) or why not (``"value: ..."``);
the cache skips an invalid message for every consumer and logs it. A tombstone (``value`` is
``None``) and a null key are not checked. :meth:`TopicModels.value_text` gives the text an SSE
event carries for a value. :func:`build_topic_checks` gives the validator of every topic of an
``options.topics[]`` list. A pipeline uses the same classes with a
:class:`~ssegate.catalogs.CatalogSet` of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ssegate.catalogs import CatalogSet
from ssegate.kafka.topics import KafkaMessage
from ssegate.models import Model, build_model

MessageValidator = Callable[[KafkaMessage], str | None]
ValueView = Callable[[bytes], str]


@dataclass(frozen=True, slots=True)
class TopicModels:
    """The models of one topic entry; either may be ``None`` (not checked)."""

    topic: str
    key: Model | None
    value: Model | None

    @classmethod
    def build(
        cls, topic_options: Mapping[str, Any], path: str, catalogs: CatalogSet
    ) -> TopicModels:
        """From a ``topics[]`` entry ``{name, key, value}`` at YAML ``path``. Raises ConfigError."""
        topic = str(topic_options["name"])
        models: dict[str, Model | None] = {}
        for role in ("key", "value"):
            spec = topic_options.get(role)
            models[role] = (
                None
                if spec is None
                else build_model(spec, f"{path}.{role}", catalogs, topic=topic, role=role)
            )
        return cls(topic, models["key"], models["value"])

    def check(self, key: bytes | None, value: bytes | None) -> str | None:
        """``None`` if the key and value are valid, else ``"key: ..."`` or ``"value: ..."``."""
        if self.key is not None and key is not None:
            reason = self.key.validate(key)
            if reason is not None:
                return f"key: {reason}"
        if self.value is not None and value is not None:
            reason = self.value.validate(value)
            if reason is not None:
                return f"value: {reason}"
        return None

    def validate(self, message: KafkaMessage) -> str | None:
        return self.check(message.key, message.value)

    def value_text(self, value: bytes) -> str:
        """The SSE text of a valid value: the model's view, or UTF-8 text without a model."""
        if self.value is None:
            return value.decode("utf-8", "replace")
        return self.value.to_text(value)


def build_topic_checks(
    topics: Sequence[Mapping[str, Any]], path: str, catalogs: CatalogSet
) -> dict[str, MessageValidator]:
    """``options.topics[]`` at YAML ``path`` → the validator of every topic that names a model."""
    checks: dict[str, MessageValidator] = {}
    for index, topic in enumerate(topics):
        models = TopicModels.build(topic, f"{path}[{index}]", catalogs)
        if models.key is not None or models.value is not None:
            checks[str(topic["name"])] = models.validate
    return checks

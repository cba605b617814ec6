"""Creating the topics a pipeline writes to, before its queries start.

Spark's Kafka sink writes to whatever topic exists (or what the broker auto-creates with its
defaults); a compacted topic must be created as such before the first record, so the pipeline
creates every missing sink and dead-letter topic itself. Existing topics are left as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from ssegate.config.errors import ConfigError
from ssegate.telemetry.log import event

_TIMEOUT = 30.0


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int = 1
    compacted: bool = False


def ensure_topics(bootstrap: str, topics: Sequence[TopicSpec]) -> list[str]:
    """Create the topics that do not exist yet; return the names created."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        existing = set(admin.list_topics(timeout=_TIMEOUT).topics)
    except KafkaException as exc:
        raise ConfigError("bootstrap", f"cannot reach Kafka at {bootstrap}: {exc}") from None
    missing = [t for t in topics if t.name not in existing]
    if not missing:
        return []
    new = [
        NewTopic(t.name, num_partitions=t.partitions, replication_factor=-1,
                 config={"cleanup.policy": "compact"} if t.compacted else {})
        for t in missing
    ]  # fmt: skip
    created = []
    for name, future in admin.create_topics(new, operation_timeout=_TIMEOUT).items():
        try:
            future.result(timeout=_TIMEOUT)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                continue
            raise ConfigError("sinks", f"cannot create topic {name!r}: {exc}") from None
        created.append(name)
        event("pipeline.topic.created", topic=name)
    return created

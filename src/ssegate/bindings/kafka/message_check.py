"""The seam where a topic's ``key`` and ``value`` models check each message.

A :data:`MessageCheck` takes a message and returns ``None`` when it is valid, or the reason it
is not. The cache runs the checks of a topic once per message, in the fetch thread, so checks
must be pure and thread-safe. An invalid message is skipped for every subscriber.

The checks themselves are the topic's models (:func:`ssegate.models.topics.build_topic_checks`:
``json``, ``avro``, ``protobuf`` and ``string``, with their catalogs); this module holds the
contract and :func:`all_of`, which joins several checks into one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ssegate.kafka.topics import KafkaMessage

MessageCheck = Callable[[KafkaMessage], "str | None"]
BytesCheck = Callable[[bytes], "str | None"]


def all_of(checks: Sequence[MessageCheck]) -> MessageCheck | None:
    """One check that fails with the first failing one of ``checks``."""
    if not checks:
        return None
    if len(checks) == 1:
        return checks[0]

    def check(message: KafkaMessage) -> str | None:
        for one in checks:
            reason = one(message)
            if reason is not None:
                return reason
        return None

    return check

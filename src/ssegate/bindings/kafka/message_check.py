"""The seam where a topic's ``key`` and ``value`` models check each message.

A :data:`MessageCheck` takes a message and returns ``None`` when it is valid, or the reason it
is not. The cache runs the checks of a topic once per message, in the fetch thread, so checks
must be pure and thread-safe. An invalid message is skipped for every subscriber.

What is checked here, until schema catalogs are wired in: ``string`` (the bytes decode as
UTF-8, or UTF-16 with ``encoding: utf_16``) and ``json`` (the bytes parse as a JSON document).
A model that names a ``catalog`` is not checked yet beyond that (``avro`` and ``protobuf`` are
passed through unchecked).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ssegate.kafka.topics import KafkaMessage

MessageCheck = Callable[[KafkaMessage], "str | None"]
BytesCheck = Callable[[bytes], "str | None"]


def _utf8(data: bytes) -> str | None:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not UTF-8 at byte {exc.start}"
    return None


def _utf16(data: bytes) -> str | None:
    try:
        data.decode("utf-16")
    except UnicodeDecodeError as exc:
        return f"not UTF-16 at byte {exc.start}"
    return None


def _json(data: bytes) -> str | None:
    try:
        json.loads(data)
    except (UnicodeDecodeError, ValueError) as exc:
        return f"not JSON: {exc}"
    return None


def bytes_check(model: Any) -> BytesCheck | None:
    """The check for one ``model`` option (a name or a model object), or ``None``."""
    if model is None:
        return None
    spec: Mapping[str, Any] = {"model": model} if isinstance(model, str) else model
    name = spec.get("model")
    if name == "string":
        return _utf16 if spec.get("encoding") == "utf_16" else _utf8
    if name == "json":
        return _json
    return None


def message_check(key_model: Any, value_model: Any) -> MessageCheck | None:
    """The check of a topic's ``key`` and ``value`` models; tombstones and null keys pass."""
    key_check = bytes_check(key_model)
    value_check = bytes_check(value_model)
    if key_check is None and value_check is None:
        return None

    def check(message: KafkaMessage) -> str | None:
        if key_check is not None and message.key is not None:
            reason = key_check(message.key)
            if reason is not None:
                return f"key {reason}"
        if value_check is not None and message.value is not None:
            reason = value_check(message.value)
            if reason is not None:
                return f"value {reason}"
        return None

    return check


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


def topic_checks(topics: Sequence[Mapping[str, Any]]) -> dict[str, MessageCheck]:
    """``options.topics[]`` → the check of every topic that has one."""
    checks: dict[str, MessageCheck] = {}
    for topic in topics:
        check = message_check(topic.get("key"), topic.get("value"))
        if check is not None:
            checks[str(topic["name"])] = check
    return checks

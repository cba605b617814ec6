"""Test edges for the sse-kafka proxy: an in-memory topic log and a sink that keeps the wire.

:class:`TopicLog` keeps the :class:`~ssegate.kafka.topics.TopicSource` contract with lists of
messages per partition: a subscriber gets, per partition, what the log holds from its start
offset, then what is appended. :class:`WireSink` encodes what it is given with the real SSE
encoder; :meth:`WireSink.parsed` reads it back with the real parser.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ssegate.bindings.sse.source import EventCheck
from ssegate.contract.exchange import DirectSocket
from ssegate.kafka.topics import DefaultOffset, KafkaMessage, TopicListener, UnknownTopic
from ssegate.models.topics import ValueView
from ssegate.sse_codec.encoder import encode_event
from ssegate.sse_codec.parser import SseEvent, SseIdOnly, SseParser


@dataclass
class _Subscription:
    log: TopicLog
    topic: str
    listener: TopicListener
    cancelled: bool = False

    carried: int = 1
    """The streams the listener says it delivers to (``carry``)."""

    def cancel(self) -> None:
        self.cancelled = True
        self.log.subscriptions.remove(self)

    def carry(self, streams: int) -> None:
        self.carried = streams


@dataclass
class TopicLog:
    partitions: dict[str, int] = field(default_factory=dict)
    messages: dict[tuple[str, int], list[KafkaMessage]] = field(default_factory=dict)
    log_start: dict[tuple[str, int], int] = field(default_factory=dict)
    subscriptions: list[_Subscription] = field(default_factory=list)
    starts: list[Mapping[int, int]] = field(default_factory=list)

    def create(self, topic: str, partitions: int) -> None:
        self.partitions[topic] = partitions
        for p in range(partitions):
            self.messages[(topic, p)] = []

    def append(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: tuple[tuple[str, bytes], ...] = (),
    ) -> KafkaMessage:
        held = self.messages[(topic, partition)]
        offset = self.log_start.get((topic, partition), 0) + len(held)
        message = KafkaMessage(topic, partition, offset, key, value, headers)
        held.append(message)
        for subscription in list(self.subscriptions):
            if subscription.topic == topic:
                subscription.listener.on_messages([message])
        return message

    def append_batch(
        self, topic: str, partition: int, entries: list[tuple[bytes | None, bytes | None]]
    ) -> list[KafkaMessage]:
        """Append ``(key, value)`` pairs and hand the same batch object to every subscriber,
        as the Kafka cache does with what one fetch brought."""
        held = self.messages[(topic, partition)]
        start = self.log_start.get((topic, partition), 0) + len(held)
        batch = [
            KafkaMessage(topic, partition, start + i, key, value)
            for i, (key, value) in enumerate(entries)
        ]
        held.extend(batch)
        for subscription in list(self.subscriptions):
            if subscription.topic == topic:
                subscription.listener.on_messages(batch)
        return batch

    def subscribe(
        self,
        topic: str,
        start: Mapping[int, int],
        listener: TopicListener,
        *,
        default: DefaultOffset | None = None,
    ) -> _Subscription:
        if topic not in self.partitions:
            raise UnknownTopic(topic)
        self.starts.append(dict(start))
        subscription = _Subscription(self, topic, listener)
        self.subscriptions.append(subscription)
        listener.on_partitions(list(range(self.partitions[topic])))
        for p in range(self.partitions[topic]):
            first = self.log_start.get((topic, p), 0)
            held = self.messages[(topic, p)]
            wanted = start.get(p, first + len(held) if default == "live" else first)
            if wanted < first:
                listener.on_reset(p, wanted, first)
                wanted = first
            batch = held[wanted - first :]
            if batch:
                listener.on_messages(batch)
        return subscription

    def value_text(self, topic: str) -> ValueView | None:
        """No topic has a value view here: values go out as UTF-8 text."""
        return None


class WireSink:
    """An SseSink that keeps the bytes a client would receive (no check, no timestamps)."""

    timestamps = False
    check: EventCheck | None = None

    def __init__(self) -> None:
        self.wire = bytearray()
        self.opened = False
        self.failed: tuple[int, str] | None = None
        self.ended = False
        self.closed = False

    def open(self) -> None:
        self.opened = True

    def event(self, data: str | None, *, event: str | None = None, id: str | None = None) -> None:
        self.write_encoded(encode_event(data, event=event, id=id))

    def write_encoded(self, data: bytes) -> None:
        assert not self.closed
        self.opened = True
        self.wire += data

    def comment(self, text: str = "") -> None:
        self.wire += f":{text}\n\n".encode()

    def end(self) -> None:
        self.ended = self.closed = True

    def fail(self, status: int, reason: str) -> None:
        self.failed = (status, reason)
        self.closed = True

    def parsed(self) -> list[SseEvent | SseIdOnly]:
        return SseParser().feed(bytes(self.wire))

    def events(self) -> list[SseEvent]:
        return [e for e in self.parsed() if isinstance(e, SseEvent)]


class StuckStream:
    """A ResponseStream whose client reads nothing: every byte sent stays buffered."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.body = b""
        self.was_reset = False
        self._callbacks: list[Callable[[], None]] = []

    def send_headers(
        self, status: int, headers: list[tuple[str, str]], *, end: bool = False
    ) -> None:
        self.status = status

    def send_data(self, data: bytes, *, end: bool = False) -> None:
        self.body += data

    def reset(self) -> None:
        self.was_reset = True
        for callback in self._callbacks:
            callback()

    def abort(self, connection_limit: int) -> None:
        self.reset()

    @property
    def buffered(self) -> int:
        return len(self.body)

    @property
    def unsent(self) -> int:
        return len(self.body)

    @property
    def writable(self) -> bool:
        return True  # it never refuses: found slow by its unsent bytes alone

    @property
    def closed(self) -> bool:
        return self.was_reset

    def on_close(self, callback: Callable[[], None]) -> None:
        self._callbacks.append(callback)

    def on_drain(self, callback: Callable[[], None]) -> None:
        return

    def direct_socket(self) -> DirectSocket | None:
        return None

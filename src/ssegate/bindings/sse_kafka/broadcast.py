"""Live streams of one topic and shape, fed as one: :class:`Broadcast`.

Once a stream is live on every partition of its topic, its progress is the topic's live end,
the same as that of every other live stream of the topic, and from then on each batch gives
every such stream of the same shape (filter, id format, value view, timestamps, check) the
same bytes and the same new progress. A :class:`Broadcast` stands for all of them: it is a
:class:`~.subscriber.TopicSubscriber` of its own, subscribed to the topic once, that works each
batch out once and writes it into a :class:`~ssegate.bindings.sse.fanout.SinkGroup` holding
every member's stream, which writes them all in one pass (one ``send()`` per stream, made from
C, where the stream allows it). Per batch the topic visits one listener per broadcast instead of
one per stream, and no Python runs per member but one pass of the group's write loop.

Rules:

- A stream is offered to its broadcast once it is live on every partition
  (:meth:`~.subscriber.TopicSubscriber.on_live`), and joins in a loop callback of its own:
  between two fan-outs, when every live listener of the topic has had every batch fetched so
  far. It joins only if its progress then equals the broadcast's (otherwise it stays alone:
  correct, and slower). Joining ends its own topic subscription.
- The first stream of a shape starts the broadcast, from that stream's progress (the topic's
  live end); a broadcast that is not live at once on every partition ends, and the stream
  stays alone.
- A keep-alive asks a member for its resume id: the broadcast's progress, when it moved past the
  last id that member was written (:meth:`Broadcast.keep_alive_id`), written to that member
  alone.
- A member leaves when its stream closes (:meth:`~.subscriber.TopicSubscriber.cancel`); one
  that a group write dropped (a slow client) is counted like any dropped subscriber. A member
  whose client stops reading leaves too (:meth:`~.subscriber.TopicSubscriber.pace`), from the
  broadcast's progress, and joins again once it has read up to the live end. The last member
  leaving ends the broadcast and its subscription.
- ``ssegate.sse_kafka.broadcast.streams`` (a gauge, per sse-kafka binding) says how many streams
  broadcasts write; the others are written alone.
- The broadcast's subscription carries its members (``TopicSubscription.carry``), so the cache
  server's subscriber count (``ssegate.kafka.subscribers``) counts every stream.

Broadcasts need a running event loop (streams join in a callback of their own); without one
every subscriber stays alone.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from ssegate.bindings.sse.fanout import SinkGroup
from ssegate.bindings.sse_kafka.event_id import ProgressEncoder, format_event_id
from ssegate.bindings.sse_kafka.shared import SubscriberShape
from ssegate.bindings.sse_kafka.subscriber import TopicSubscriber
from ssegate.kafka.topics import UnknownTopic

STREAMS_METRIC = "ssegate.sse_kafka.broadcast.streams"
"""Gauge: streams a broadcast writes now (the rest of the proxy's streams are written alone)."""

BroadcastKey = tuple[int, str, SubscriberShape]
"""``(id(source), topic, shape)``."""


@dataclass(slots=True)
class _Written:
    """The last id one member was written by itself (a keep-alive), and when."""

    token: str
    writes: int
    """The group's write count then: once the group writes again, the broadcast's id is the
    member's last."""


class Broadcast(TopicSubscriber):
    """The live streams of one topic and shape: one subscription, written as one."""

    __slots__ = ("group", "key", "members", "registry")

    def __init__(self, broadcasts: Broadcasts, key: BroadcastKey, first: TopicSubscriber) -> None:
        shape = first.shape
        group: SinkGroup[TopicSubscriber] = SinkGroup(
            timestamps=shape.timestamps, check=shape.check, on_dropped=_dropped
        )
        super().__init__(
            group,
            topic=first.topic,
            progress=ProgressEncoder(first.progress.offsets),
            message_filter=shape.filter,
            id_format=shape.id_format,
            shares=first.shares,
            view=shape.view,
        )
        self.resume_points.last_token = first.resume_points.last_token
        self.registry = broadcasts
        self.key = key
        self.group = group
        self.members: dict[TopicSubscriber, _Written] = {}

    def add(self, member: TopicSubscriber) -> None:
        self.members[member] = _Written(member.resume_points.last_token, self.group.writes)
        self.group.add(member.sink, member)
        self.shares.metrics.gauge(STREAMS_METRIC, self.shares.binding, 1)
        self._carry()

    def remove(self, member: TopicSubscriber) -> None:
        if self.members.pop(member, None) is None:
            return
        self.group.discard(member.sink)
        self.shares.metrics.gauge(STREAMS_METRIC, self.shares.binding, -1)
        if self.members:
            self._carry()
        else:
            self.cancel()

    def cancel(self) -> None:
        """No member left (or the broadcast could not start): it unsubscribes."""
        super().cancel()
        self.registry.forget(self)

    def keep_alive_id(self, member: TopicSubscriber) -> str | None:
        """The keep-alive id of ``member``: the broadcast's progress when it moved past the last
        id ``member`` was written, else ``None``."""
        written = self.members.get(member)
        if written is None:
            return None
        token = self.live_token()
        if token == self.last_written(member) or not self.progress.offsets:
            return None
        written.token, written.writes = token, self.group.writes
        return format_event_id(token, None, self.shape.id_format, None)

    def last_written(self, member: TopicSubscriber) -> str:
        """The progress token of the last id ``member`` was written: its own keep-alive's,
        or the group's latest since then."""
        written = self.members.get(member)
        if written is None or written.writes != self.group.writes:
            return self.resume_points.last_token
        return written.token

    def _carry(self) -> None:
        if self.topic_subscription is not None:
            self.topic_subscription.carry(len(self.members))


class Broadcasts:
    """The broadcasts of one sse-kafka proxy, by source, topic and shape."""

    def __init__(self) -> None:
        self._broadcasts: dict[BroadcastKey, Broadcast] = {}

    def __len__(self) -> int:
        return len(self._broadcasts)

    def members(self) -> int:
        """Streams written by a broadcast now."""
        return sum(len(broadcast.members) for broadcast in self._broadcasts.values())

    def offer(self, subscriber: TopicSubscriber) -> None:
        """``subscriber`` is live on every partition: join it to its broadcast in a callback
        of its own (see the module's rules)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        loop.call_soon(self._join, subscriber)

    def forget(self, broadcast: Broadcast) -> None:
        if self._broadcasts.get(broadcast.key) is broadcast:
            del self._broadcasts[broadcast.key]

    def _join(self, subscriber: TopicSubscriber) -> None:
        source = subscriber.source
        if not subscriber.joinable or source is None:
            return
        key = (id(source), subscriber.topic, subscriber.shape)
        token = subscriber.live_token()
        broadcast = self._broadcasts.get(key)
        if broadcast is None:
            broadcast = Broadcast(self, key, subscriber)
            try:
                broadcast.topic_subscription = source.subscribe(
                    subscriber.topic, dict(broadcast.progress.offsets), broadcast, default="live"
                )
            except UnknownTopic:
                return
            if not broadcast.live_everywhere:
                broadcast.cancel()
                return
            self._broadcasts[key] = broadcast
        if broadcast.live_token() != token:  # not in step after all: it stays alone
            if not broadcast.members:
                broadcast.cancel()
            return
        subscriber.join(broadcast)
        broadcast.add(subscriber)


def _dropped(member: TopicSubscriber) -> None:
    """A group write closed ``member``'s stream (a slow client): count it as dropped."""
    member._dropped()

"""Live streams of one topic that are in step, fed as one: :class:`Cohort`.

Once a stream is live on every partition of its topic, its progress is the topic's live end,
the same as that of every other live stream of the topic, and from then on each batch gives
every such stream of the same shape (filter, id format, value view, timestamps, check) the
same bytes and the same new progress. A :class:`Cohort` stands for all of them: one
:class:`~.subscriber.TopicSubscriber`, its *leader*, subscribes to the topic, works each batch
out once and writes it into a :class:`~ssegate.bindings.sse.fanout.SinkGroup` holding every
member's stream, which writes them all in one pass (one ``send()`` per stream, made from C,
where the stream allows it). Per batch the topic visits one listener per cohort instead of one
per stream, and no Python runs per member but one pass of the group's write loop.

Rules:

- A stream is offered to its cohort once it is live on every partition
  (:meth:`~.subscriber.TopicSubscriber.on_live`), and joins in a loop callback of its own:
  between two fan-outs, when every live listener of the topic has had every batch fetched so
  far. It joins only if its progress then equals the cohort's (otherwise it stays alone:
  correct, and slower). Joining ends its own topic subscription.
- The first stream of a shape starts the cohort: the leader subscribes from that stream's
  progress, the topic's live end, and is live at once; if it is not, there is no cohort.
- A keep-alive asks a member for its resume id: the leader's progress, when it moved past the
  last id that member was written (:meth:`Cohort.resume_id`), written to that member alone.
- A member leaves when its stream closes (:meth:`~.subscriber.TopicSubscriber.cancel`); one
  that a group write dropped (a slow client) is counted like any dropped subscriber. A member
  whose client stops reading leaves too (:meth:`~.subscriber.TopicSubscriber.pace`), from the
  leader's progress, and joins again once it has read up to the live end. The last
  member leaving ends the cohort and the leader's subscription.
- ``ssegate.sse_kafka.cohort.streams`` (a gauge, per sse-kafka binding) says how many streams
  cohorts write; the others are written alone.
- The leader's subscription carries its members (``TopicSubscription.carry``), so the cache
  server's subscriber count (``ssegate.kafka.subscribers``) counts every stream.

Cohorts need a running event loop (they join in a callback of their own); without one every
subscriber stays alone.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from ssegate.bindings.sse.fanout import SinkGroup
from ssegate.bindings.sse_kafka.event_id import ProgressEncoder, format_event_id
from ssegate.bindings.sse_kafka.shared import SubscriberShape
from ssegate.bindings.sse_kafka.subscriber import TopicSubscriber
from ssegate.kafka.topics import UnknownTopic

STREAMS_METRIC = "ssegate.sse_kafka.cohort.streams"
"""Gauge: streams a cohort writes now (the rest of the proxy's streams are written alone)."""

CohortKey = tuple[int, str, SubscriberShape]
"""``(id(source), topic, shape)``."""


@dataclass(slots=True)
class _Written:
    """The last id one member was written by itself (a keep-alive), and when."""

    token: str
    writes: int
    """The group's write count then: once the group writes again, the leader's id is the
    member's last."""


class Cohort:
    """The streams of one topic and shape that the leader writes as one."""

    __slots__ = ("cohorts", "group", "key", "leader", "members")

    def __init__(
        self,
        cohorts: Cohorts,
        key: CohortKey,
        leader: TopicSubscriber,
        group: SinkGroup[TopicSubscriber],
    ) -> None:
        self.cohorts = cohorts
        self.key = key
        self.leader = leader
        self.group = group
        self.members: dict[TopicSubscriber, _Written] = {}

    def add(self, member: TopicSubscriber) -> None:
        self.members[member] = _Written(member.resume_points.last_token, self.group.writes)
        self.group.add(member.sink, member)
        self.leader.shares.metrics.gauge(STREAMS_METRIC, self.leader.shares.binding, 1)
        self._carry()

    def remove(self, member: TopicSubscriber) -> None:
        if self.members.pop(member, None) is None:
            return
        self.group.discard(member.sink)
        self.leader.shares.metrics.gauge(STREAMS_METRIC, self.leader.shares.binding, -1)
        if self.members:
            self._carry()
        else:
            self.end()

    def end(self) -> None:
        """No member left (or the cohort could not start): the leader unsubscribes."""
        self.leader.cancel()
        self.cohorts.forget(self)

    def token(self) -> str:
        return self.leader.live_token()

    def resume_id(self, member: TopicSubscriber) -> str | None:
        """The keep-alive id of ``member``: the cohort's progress when it moved past the last
        id ``member`` was written, else ``None``."""
        written = self.members.get(member)
        if written is None:
            return None
        leader = self.leader
        token = leader.live_token()
        last = self.last_written(member)
        if token == last or not leader.progress.offsets:
            return None
        written.token, written.writes = token, self.group.writes
        return format_event_id(token, None, leader.id_format, None)

    def last_written(self, member: TopicSubscriber) -> str:
        """The progress token of the last id ``member`` was written: its own keep-alive's,
        or the group's latest since then."""
        written = self.members.get(member)
        if written is None or written.writes != self.group.writes:
            return self.leader.resume_points.last_token
        return written.token

    def _carry(self) -> None:
        subscription = self.leader.topic_subscription
        if subscription is not None:
            subscription.carry(len(self.members))


class Cohorts:
    """The cohorts of one sse-kafka proxy, by source, topic and shape."""

    def __init__(self) -> None:
        self._cohorts: dict[CohortKey, Cohort] = {}

    def __len__(self) -> int:
        return len(self._cohorts)

    def members(self) -> int:
        """Streams written by a cohort now."""
        return sum(len(cohort.members) for cohort in self._cohorts.values())

    def offer(self, subscriber: TopicSubscriber) -> None:
        """``subscriber`` is live on every partition: join it to its cohort in a callback of
        its own (see the module's rules)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        loop.call_soon(self._join, subscriber)

    def forget(self, cohort: Cohort) -> None:
        if self._cohorts.get(cohort.key) is cohort:
            del self._cohorts[cohort.key]

    def _join(self, subscriber: TopicSubscriber) -> None:
        if not subscriber.joinable or subscriber.source is None:
            return
        key = (id(subscriber.source), subscriber.topic, subscriber.shape)
        token = subscriber.live_token()
        cohort = self._cohorts.get(key)
        if cohort is None:
            cohort = self._start(subscriber, key)
            if cohort is None:
                return
        if cohort.token() != token:  # not in step after all: it stays alone
            if not cohort.members:
                cohort.end()
            return
        subscriber.join(cohort)
        cohort.add(subscriber)

    def _start(self, subscriber: TopicSubscriber, key: CohortKey) -> Cohort | None:
        """A cohort led from ``subscriber``'s progress (the topic's live end), live at once;
        ``None`` when the leader could not be made live."""
        source = subscriber.source
        assert source is not None
        shape = subscriber.shape
        group: SinkGroup[TopicSubscriber] = SinkGroup(
            timestamps=shape.timestamps, check=shape.check, on_dropped=_dropped
        )
        leader = _leader_like(subscriber, group)
        try:
            leader.topic_subscription = source.subscribe(
                subscriber.topic, dict(leader.progress.offsets), leader, default="live"
            )
        except UnknownTopic:
            return None
        if not leader.live_everywhere:
            leader.cancel()
            return None
        cohort = self._cohorts[key] = Cohort(self, key, leader, group)
        return cohort


def _leader_like(subscriber: TopicSubscriber, group: SinkGroup[TopicSubscriber]) -> TopicSubscriber:
    """A subscriber like ``subscriber`` (same topic, shape and progress) writing into
    ``group``: a cohort's leader, not yet subscribed."""
    leader = TopicSubscriber(
        group,
        topic=subscriber.topic,
        progress=ProgressEncoder(subscriber.progress.offsets),
        message_filter=subscriber.filter,
        id_format=subscriber.id_format,
        shares=subscriber.shares,
        view=subscriber.view,
    )
    leader.resume_points.last_token = subscriber.resume_points.last_token
    return leader


def _dropped(member: TopicSubscriber) -> None:
    """A group write closed ``member``'s stream (a slow client): count it as dropped."""
    member._dropped()

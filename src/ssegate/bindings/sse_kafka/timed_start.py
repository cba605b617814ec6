"""The asyncio edge of ``?since=``: a stream waiting for the broker's time index.

The sse-kafka proxy answers ``subscribe`` at once, but where a time falls in a topic is a
broker round trip (:class:`~ssegate.kafka.times.TopicTimes`). So a stream with ``since`` gets a
:class:`TimedStart` as its :class:`~ssegate.bindings.sse.source.Subscription`: it awaits the
lookup in a task, works the start out (:func:`~.since.start_of`), and hands it to the proxy's
``begin``, which subscribes exactly as for a last event id. The sse server holds the response
headers back meanwhile (:class:`~ssegate.bindings.sse.source.SseSink`), so a lookup that fails
is still an HTTP answer: 404 for a topic the broker does not know, 503 when the broker does not
answer in time (``ssegate.sse_kafka.since_lookups_failed``).

A partition where the time falls at or before the oldest record retention left gets
``event:reset`` with ``since`` in place of ``requested``
(:meth:`~.subscriber.TopicSubscriber.on_time_reset`): ``begin`` writes it before it subscribes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping

from ssegate.bindings.sse.source import Subscription
from ssegate.bindings.sse_kafka.since import SinceStart, start_of
from ssegate.kafka.times import PartitionTime, TimeLookupFailed
from ssegate.kafka.topics import UnknownTopic
from ssegate.telemetry import log

Lookup = Callable[[], Awaitable[Mapping[int, PartitionTime]]]
"""Ask the broker where the time falls (called once, inside the task)."""
Begin = Callable[[SinceStart], Subscription]
"""Subscribe from these start offsets (the proxy's path for a last event id)."""
Refuse = Callable[[int, str], None]
"""Answer the stream with this status and reason (logged and counted by the proxy, a 503 also
in ``ssegate.sse_kafka.since_lookups_failed``)."""


class TimedStart:
    """A stream's subscription while its ``since`` is looked up, then the one it started."""

    __slots__ = ("_begin", "_binding", "_cancelled", "_inner", "_refuse", "_stalled", "_task")

    def __init__(
        self, lookup: Lookup, *, topic: str, begin: Begin, refuse: Refuse, binding: str
    ) -> None:
        self._begin = begin
        self._refuse = refuse
        self._binding = binding
        self._inner: Subscription | None = None
        self._cancelled = False
        self._stalled = False
        self._task = asyncio.ensure_future(self._run(lookup, topic))

    async def _run(self, lookup: Lookup, topic: str) -> None:
        try:
            times = await lookup()
        except UnknownTopic:
            self._refuse(404, f"topic '{topic}' does not exist")
            return
        except TimeLookupFailed as exc:
            self._refuse(503, f"since: {exc.reason}")
            return
        except Exception as exc:  # a lookup bug must not leave the stream unanswered
            log.error("sse_kafka.since_failed", binding=self._binding, topic=topic,
                      error=repr(exc))  # fmt: skip
            self._refuse(500, "internal error")
            return
        if self._cancelled:
            return
        inner = self._inner = self._begin(start_of(times))
        if self._stalled:
            inner.pace(True)

    def cancel(self) -> None:
        if self._cancelled:
            return
        self._cancelled = True
        self._task.cancel()
        if self._inner is not None:
            self._inner.cancel()

    def resume_id(self) -> str | None:
        return None if self._inner is None else self._inner.resume_id()

    def behind_since(self, stalled_since: float, now: float) -> float | None:
        if self._inner is None:  # nothing to keep yet
            return stalled_since
        return self._inner.behind_since(stalled_since, now)

    def pace(self, stalled: bool) -> None:
        if self._inner is None:
            self._stalled = stalled
        else:
            self._inner.pace(stalled)

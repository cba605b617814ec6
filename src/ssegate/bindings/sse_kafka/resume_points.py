"""The resume points one subscriber writes besides its events' ids: :class:`ResumePoints`.

A client resumes from the last ``id:`` it read. Events carry their own ids
(:func:`~.batch_outcome.work_out`); this module decides when the progress goes out without an
event, so that a reconnect never rescans a long gap the stream's filter passed over:

- The resume point of a quiet stream rides on its keep-alive
  (:meth:`~.subscriber.TopicSubscriber.resume_id`, asked by the sse server each keep-alive
  interval): ``id:<progress>`` and a blank line instead of the ``:`` comment, when the progress
  moved since the last id written. One write per stream per interval at most, so a reconnect
  never rescans a filtered gap older than one interval.
- Before a partition is live (replay, catch-up), messages the filter drops and offsets the
  cache passed over move the progress without an event. Once :data:`ID_ONLY_AFTER_SKIPPED` of
  them pile up, or :data:`ID_ONLY_AFTER_SECONDS` after the last id written, an id-only block
  goes out. Once a partition is live, messages the interest index offers that the filter still
  drops (the key matches, a header does not) move the progress the same way, and only the
  keep-alive carries it past them (the subscriber does not report them here).
- A requested offset below the log start (retention) starts the partition at the earliest
  offset and says so: ``event:reset`` with ``data:{"partition":P,"requested":R,"earliest":E}``
  and the new id, before the messages that follow. A ``since`` time at or before the oldest
  record retention left is said the same way, ``since`` (ms) in place of ``requested``.

The timer is the only asynchronous part: without a running event loop an id-only block goes
out only when the count or the time is already reached as the progress moves.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

from ssegate.bindings.sse.source import SseSink
from ssegate.bindings.sse_kafka.event_id import EventIdFormat, format_event_id

ID_ONLY_AFTER_SKIPPED = 1000
ID_ONLY_AFTER_SECONDS = 1.0


class ResumePoints:
    """What one subscriber's client was last told of its progress, and when to tell it again.

    Its owner holds the progress and hands over a token whenever an id goes out: it reports
    the ids its events carried (:meth:`written`) and the messages and offsets its progress moved
    past without one (:attr:`skipped`, then :meth:`passed_over`); this object answers
    keep-alives (:meth:`keep_alive`) and writes ids alone (:meth:`write`) or with
    ``event:reset`` (:meth:`reset`) into the sink.
    """

    __slots__ = ("_timer", "clock", "id_format", "last_id_at", "last_token", "sink", "skipped")

    def __init__(
        self,
        sink: SseSink,
        id_format: EventIdFormat,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sink = sink
        self.id_format = id_format
        self.clock = clock
        self.last_token = ""
        """The progress token of the last id the client was written."""
        self.skipped = 0
        """Messages and offsets the progress moved past since that id."""
        self.last_id_at = clock()
        self._timer: asyncio.TimerHandle | None = None

    def written(self, token: str, skipped: int = 0) -> None:
        """An id with progress ``token`` went out; ``skipped`` messages were passed over since."""
        self.skipped = skipped
        self.last_id_at = self.clock()
        self.last_token = token
        self.cancel_timer()

    def keep_alive(self, token: str) -> str | None:
        """The id a keep-alive carries: ``token``, when it moved past the last id written."""
        if token == self.last_token:
            return None
        self.written(token)
        return format_event_id(token, None, self.id_format, None)

    def write(self, token: str, data: str | None = None, event: str | None = None) -> None:
        """Write ``id:<token>`` now: alone, or with ``data`` as an ``event``."""
        self.written(token)
        self.sink.event(data, event=event, id=format_event_id(token, None, self.id_format, None))

    def reset(self, token: str, partition: int, earliest: int, asked: str, value: int) -> None:
        """Write ``event:reset``: ``partition`` starts at ``earliest``, not where the client
        asked (``asked`` is ``requested``, an offset, or ``since``, a time in ms: ``value``)."""
        data = json.dumps(
            {"partition": partition, asked: value, "earliest": earliest}, separators=(",", ":")
        )
        self.write(token, data, "reset")

    def passed_over(self, send: Callable[[], None], gone: Callable[[], bool]) -> None:
        """The progress moved without an id on the wire: ``send`` one now, or arm the timer
        that sends it once due (unless ``gone`` says the stream is gone by then)."""
        due = self.last_id_at + ID_ONLY_AFTER_SECONDS
        if self.skipped >= ID_ONLY_AFTER_SKIPPED or self.clock() >= due:
            send()
            return
        if self._timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._timer = loop.call_later(max(0.0, due - self.clock()), self._due, send, gone)

    def clear(self) -> None:
        """Nothing is owed any more (someone else writes the stream now)."""
        self.cancel_timer()
        self.skipped = 0

    def cancel_timer(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def _due(self, send: Callable[[], None], gone: Callable[[], bool]) -> None:
        self._timer = None
        if self.skipped and not gone():
            send()

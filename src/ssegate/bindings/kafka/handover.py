"""Fetched events from the fetch thread to the event loop: joined while the loop is busy,
given back to the loop in slices, and bounded.

The fetch thread hands over a list of events per pass. Handing each list over as its own loop
callback would make a busy loop pay for every small batch separately: a fan-out has a cost per
batch whatever the batch holds, so batches queued behind one slow fan-out would each cost as
much again, and a single stall would grow into a backlog.

:class:`Handover` keeps one inbox instead. The thread adds to it and schedules a drain only
when none is pending; the drain takes everything gathered so far and :func:`coalesce` joins
the batches of each partition into one (at most :data:`MAX_JOINED` messages each). An idle loop
drains at once, so nothing waits; a busy one finds, when it comes back, one batch per partition
holding all that arrived meanwhile.

Overload stays bounded and visible:

- **Slices.** A drain works for at most ``slice_seconds`` of loop time, then puts what is left
  back at the head of the inbox and schedules itself again, so timers, new connections and the
  metrics endpoint run between slices whatever the load.
- **Bounded intake.** Once the inbox holds more than ``max_pending`` messages, :meth:`put`
  makes the fetch thread wait until the loop has worked it down: Kafka keeps what is not
  fetched yet, and memory here stays bounded. Each time the thread has to wait the loop hears
  of it (``on_stall``: a log line and a metric at the cache server).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from ssegate.bindings.kafka.fetch_events import Event, Fetched, TopicMissing, TopicsListed

MAX_JOINED = 10_000
"""Messages one joined batch holds at most (one fetch pass brings at most 5,000)."""
SLICE_SECONDS = 0.02
MAX_PENDING = 200_000
STALL_WAIT = 0.25
"""How long the fetch thread waits at a time for room (then it looks for ``close`` again)."""

_BatchKey = tuple[str, int, bool, int]
_BESIDE_THE_DATA = (TopicsListed, TopicMissing)
"""Events about which topics exist: batches of started partitions may join across them."""


def coalesce(events: Sequence[Event]) -> tuple[list[Event], int]:
    """Join consecutive :class:`Fetched` batches of one partition and reader.

    A batch joins an earlier one only if no event that concerns partitions' data lies
    between them: a broker status, a started topic, added partitions or a catch-up event keeps
    its place between what came before and after it. The periodic topic listing does not
    separate batches. Returns the events and how many batches were joined into an earlier one.
    """
    slots: list[Event | list[Fetched]] = []  # an event, or the batches joining at its place
    open_batches: dict[_BatchKey, list[Fetched]] = {}
    for event in events:
        if not isinstance(event, Fetched):
            if not isinstance(event, _BESIDE_THE_DATA):
                open_batches.clear()
            slots.append(event)
            continue
        key = (event.topic, event.partition, event.catch_up, event.ticket)
        group = open_batches.get(key)
        if group is None or sum(len(b.messages) for b in group) + len(event.messages) > MAX_JOINED:
            group = open_batches[key] = []
            slots.append(group)
        group.append(event)
    joined = [slot if not isinstance(slot, list) else _join(slot) for slot in slots]
    return joined, len(events) - len(joined)


def _join(batches: list[Fetched]) -> Fetched:
    """One batch holding ``batches`` (consecutive, of one partition and reader), built once."""
    if len(batches) == 1:
        return batches[0]
    return replace(
        batches[0],  # its topic, partition, reader and ticket
        messages=[message for batch in batches for message in batch.messages],
        next_offset=batches[-1].next_offset,
        invalid=[entry for batch in batches for entry in batch.invalid],
        repeats=[repeat for batch in batches for repeat in batch.repeats],
        unextracted=[entry for batch in batches for entry in batch.unextracted],
        fetched=tuple(stamp for batch in batches for stamp in batch.fetched),
    )


class Handover:
    """One inbox between the fetch thread (:meth:`put`) and the loop (the drain)."""

    def __init__(
        self,
        schedule: Callable[[Callable[[], None]], None],
        consume: Callable[[list[Event], int], None],
        *,
        on_stall: Callable[[int], None] | None = None,
        max_pending: int = MAX_PENDING,
        slice_seconds: float = SLICE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``schedule`` runs a callable on the loop (``call_soon_threadsafe``); ``consume``
        gets the coalesced events and the number of batches joined; ``on_stall`` (on the loop)
        how many times the fetch thread had to wait for room since it was last called."""
        self._schedule = schedule
        self._consume = consume
        self._on_stall = on_stall
        self.max_pending = max_pending
        self.slice_seconds = slice_seconds
        self._clock = clock
        self._room = threading.Condition(threading.Lock())
        self._inbox: list[Event] = []
        self._scheduled = False
        self._closed = False
        self.pending = 0
        """Messages handed over and not yet consumed."""
        self._stalls = 0

    def put(self, events: list[Event]) -> None:
        """From the fetch thread: add ``events``; schedule a drain unless one is pending.
        Waits first while the inbox is over ``max_pending`` messages."""
        size = _messages_in(events)
        with self._room:
            if self.pending > self.max_pending and not self._closed:
                self._stalls += 1
                while self.pending > self.max_pending and not self._closed:
                    self._room.wait(STALL_WAIT)
            self._inbox.extend(events)
            self.pending += size
            if self._scheduled:
                return
            self._scheduled = True
        self._schedule(self._drain)

    def close(self) -> None:
        """Let a waiting fetch thread go; nothing more is drained."""
        with self._room:
            self._closed = True
            self._room.notify_all()

    def _drain(self) -> None:
        with self._room:
            events, self._inbox = self._inbox, []
            stalls, self._stalls = self._stalls, 0
        if stalls and self._on_stall is not None:
            self._on_stall(stalls)
        joined, count = coalesce(events) if events else ([], 0)
        deadline = self._clock() + self.slice_seconds
        done = 0
        for index, event in enumerate(joined):
            self._consume([event], count if index == 0 else 0)
            done += _messages_in((event,))
            if self._clock() >= deadline and index + 1 < len(joined):
                self._yield(joined[index + 1 :], done)
                return
        with self._room:
            self.pending -= done
            self._room.notify_all()
            if not self._inbox or self._closed:
                self._scheduled = False
                return
        self._schedule(self._drain)

    def _yield(self, rest: list[Event], done: int) -> None:
        """Out of time: ``rest`` goes back to the head of the inbox for the next slice."""
        with self._room:
            self.pending -= done
            self._room.notify_all()
            self._inbox[:0] = rest
        self._schedule(self._drain)


def _messages_in(events: Sequence[Event]) -> int:
    return sum(len(event.messages) for event in events if isinstance(event, Fetched))

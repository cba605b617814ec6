"""Fetched events from the fetch thread to the event loop, joined while the loop is busy.

The fetch thread hands over a list of events per pass. Handing each list over as its own loop
callback would make a busy loop pay for every small batch separately: a fan-out costs one
write per subscriber per batch whatever the batch holds, so batches queued behind one slow
fan-out would each cost as much again, and a single stall would grow into a backlog.

:class:`Handover` keeps one inbox instead. The thread adds to it and schedules a drain only
when none is pending; the drain takes everything gathered so far and :func:`coalesce` joins
the batches of each partition into one. An idle loop drains at once, so nothing waits; a busy
one finds, when it comes back, one batch per partition holding all that arrived meanwhile.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from ssegate.bindings.kafka.fetch_events import Event, Fetched, TopicMissing, TopicsListed

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
        if group is None:
            group = open_batches[key] = []
            slots.append(group)
        group.append(event)
    joined = [slot if not isinstance(slot, list) else _join(slot) for slot in slots]
    return joined, len(events) - len(joined)


def _join(batches: list[Fetched]) -> Fetched:
    """One batch holding ``batches`` (consecutive, of one partition and reader), built once."""
    if len(batches) == 1:
        return batches[0]
    first, last = batches[0], batches[-1]
    return Fetched(
        first.topic,
        first.partition,
        [message for batch in batches for message in batch.messages],
        last.next_offset,
        [entry for batch in batches for entry in batch.invalid],
        first.catch_up,
        first.ticket,
    )


class Handover:
    """One inbox between the fetch thread (:meth:`put`) and the loop (the drain)."""

    def __init__(
        self,
        schedule: Callable[[Callable[[], None]], None],
        consume: Callable[[list[Event], int], None],
    ) -> None:
        """``schedule`` runs a callable on the loop (``call_soon_threadsafe``); ``consume``
        gets the coalesced events and the number of batches joined."""
        self._schedule = schedule
        self._consume = consume
        self._lock = threading.Lock()
        self._inbox: list[Event] = []
        self._scheduled = False

    def put(self, events: list[Event]) -> None:
        """From the fetch thread: add ``events``; schedule a drain unless one is pending."""
        with self._lock:
            self._inbox.extend(events)
            if self._scheduled:
                return
            self._scheduled = True
        self._schedule(self._drain)

    def _drain(self) -> None:
        with self._lock:
            events, self._inbox = self._inbox, []
            self._scheduled = False
        if events:
            self._consume(*coalesce(events))

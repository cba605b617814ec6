"""How far apart the shared fetch hands batches over: from what handing the last ones cost.

A fan-out pays for every batch it gets: at least one write to each stream the batch reaches,
however few records the batch holds. Handing each record over as it comes keeps latency lowest
and makes the loop pay that for every record; gathering records for a while (the fetch's
*linger*, :func:`~.fetcher.gather_for`) pays it once per linger, and every record waits for it.

:class:`FanoutPace` sets the linger from what the batches actually cost the loop:

- **The loop's time, no more.** ``linger = cost / FANOUT_SHARE``, the share being the whole
  loop: batches come at least one hand-over's cost apart, so records that come faster than the
  loop hands them over one by one are gathered into fewer, larger batches, and between two
  hand-overs (one loop callback each) every other ready callback runs: new connections, timers,
  the metrics endpoint. A fan-out that costs little lingers little: 100 streams written in
  0.3 ms wait 0.3 ms, not the 20 ms a large one needs. Half the loop (a linger of twice the
  cost) saves CPU where records are dense (about a fifth at 1,000 streams x 1,100 msg/s) and
  costs latency where they are not: 1,000 clients that connect at once and never read make each
  batch cost 3-5 ms until their windows shut, about half a second, and the live readers' events
  then waited 6-10 ms at the fetch while the loop sat idle half the time (docs/performance.md,
  "Clients that never read").
- **Up at once, down slowly.** The cost followed is the last batch's when that is higher, and
  otherwise moves a fifth of the way down per batch (:data:`EASE`): a burst of costly batches is
  paced from its first one, and one cheap batch does not undo that.
- **Capped** at :data:`FANOUT_LINGER_MAX`: past it the loop falls behind and the hand-over joins
  what waits (:mod:`~.handover`), which also bounds the writes.

The cost is what the loop measured, not a count of subscribers: streams whose filters let few
records through, streams held for not reading and topics nobody reads cost little and add no
latency, while writes that have grown expensive (large events, a busy machine) lengthen it.
"""

from __future__ import annotations

FANOUT_SHARE = 1.0
"""The share of the loop's time handing fetched batches over may take: all of it, in turns."""
FANOUT_LINGER_MAX = 0.02
"""The longest a fetched batch waits for more records, whatever the fan-out costs."""
EASE = 0.2
"""How far the cost followed moves down towards a cheaper batch's, per batch."""


class FanoutPace:
    """The linger that follows the cost of handing batches over (pure; the loop feeds it)."""

    __slots__ = ("cost",)

    def __init__(self) -> None:
        self.cost = 0.0
        """The loop seconds a batch is taken to cost: the last one's if higher, else eased."""

    def observe(self, seconds: float) -> float:
        """One more batch took ``seconds`` of loop time; returns the linger from now on."""
        cost = self.cost
        self.cost = seconds if seconds >= cost else cost + (seconds - cost) * EASE
        return self.linger

    @property
    def linger(self) -> float:
        """Seconds at least between batches, so that handing them over keeps to the share."""
        return min(FANOUT_LINGER_MAX, self.cost / FANOUT_SHARE)

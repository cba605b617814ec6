"""The Kafka cluster as one metadata answer shows it, and what changed since the one before.

The fetch thread asks the cluster for its metadata every few seconds (and every half second
while no broker answers). Each answer lists the brokers the cluster counts as up (a node that
stops heartbeating is fenced after its session timeout, and no longer listed) and each
partition's leader. :class:`ClusterView` holds that much; :meth:`ClusterView.changes_since`
compares two views and says which brokers left or joined and which partitions of the started
topics changed leader, as one :class:`~.fetch_events.ClusterChanged`. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ssegate.bindings.kafka.fetch_events import ClusterChanged, LeaderMoved


@dataclass(frozen=True, slots=True)
class ClusterView:
    brokers: Mapping[int, str]
    """Node id → ``host:port``."""
    leaders: Mapping[tuple[str, int], int]
    """``(topic, partition)`` → the leading node's id (-1: none), for the started topics."""

    def changes_since(self, before: ClusterView | None) -> ClusterChanged | None:
        """What differs from ``before`` (``None``: this is the first view), or ``None`` when
        nothing that matters did. A partition seen for the first time has no move."""
        if before is None:
            return ClusterChanged(dict(self.brokers), first=True)
        left = {node: address for node, address in before.brokers.items()
                if node not in self.brokers}  # fmt: skip
        joined = {node: address for node, address in self.brokers.items()
                  if node not in before.brokers}  # fmt: skip
        moves = tuple(
            LeaderMoved(topic, partition, before.leaders[(topic, partition)], leader)
            for (topic, partition), leader in sorted(self.leaders.items())
            if before.leaders.get((topic, partition), leader) != leader
        )
        if not left and not joined and not moves:
            return None
        return ClusterChanged(dict(self.brokers), left, joined, moves)

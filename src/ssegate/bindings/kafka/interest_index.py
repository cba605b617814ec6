"""Which live subscribers of a partition a message can concern, found without asking them all.

A subscriber with filters declares an :class:`~ssegate.kafka.topics.Interest`: the keys and
the header ``(name, value)`` pairs of which a message must carry at least one for the
subscriber to want it. Zilla's filters are ORs of ANDs of equalities, so every filter entry
names at least one such condition (its key, else one of its headers) and every filter has an
interest. The subscriber still applies its whole filter to what it is offered; the index only
guarantees that it is offered every message it could want and, for single-key filters, no other.

:class:`InterestIndex` groups subscribers with the same interest (a thousand streams on one
tenant are one group) and maps each key and header pair to the groups that named it. Routing a
batch is one dictionary lookup per message key and header, plus one append per match:
O(messages + matches), whatever the number of subscribers that want nothing from it. Each group
gets one list of the messages it may want, in offset order, shared by its members (the live
streams of one shape among them are one broadcast, which works it out once:
:mod:`ssegate.bindings.sse_kafka.broadcast`).

Pure and synchronous: the caller owns the subscribers and calls them.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Generic, TypeVar

from ssegate.kafka.topics import Interest, KafkaMessage

Member = TypeVar("Member", bound=Hashable)
_K = TypeVar("_K", bytes, tuple[str, bytes])


class InterestGroup(Generic[Member]):
    """The members of an index that declared one interest."""

    __slots__ = ("_mark", "interest", "members", "offered")

    def __init__(self, interest: Interest) -> None:
        self.interest = interest
        self.members: dict[Member, None] = {}
        self.offered: list[KafkaMessage] = []
        """During :meth:`InterestIndex.route`: the messages this group may want."""
        self._mark = 0


class InterestIndex(Generic[Member]):
    """Members by the keys and headers they declared interest in."""

    __slots__ = ("_by_header", "_by_key", "_groups", "_member_group", "_routes")

    def __init__(self) -> None:
        self._groups: dict[Interest, InterestGroup[Member]] = {}
        self._member_group: dict[Member, InterestGroup[Member]] = {}
        self._by_key: dict[bytes, list[InterestGroup[Member]]] = {}
        self._by_header: dict[tuple[str, bytes], list[InterestGroup[Member]]] = {}
        self._routes = 0

    def __len__(self) -> int:
        return len(self._member_group)

    @property
    def groups(self) -> int:
        return len(self._groups)

    def add(self, member: Member, interest: Interest) -> None:
        if member in self._member_group:
            self.discard(member)
        group = self._groups.get(interest)
        if group is None:
            group = self._groups[interest] = InterestGroup(interest)
            for key in interest.keys:
                self._by_key.setdefault(key, []).append(group)
            for header in interest.headers:
                self._by_header.setdefault(header, []).append(group)
        group.members[member] = None
        self._member_group[member] = group

    def discard(self, member: Member) -> None:
        group = self._member_group.pop(member, None)
        if group is None:
            return
        del group.members[member]
        if group.members:
            return
        del self._groups[group.interest]
        for key in group.interest.keys:
            _unlink(self._by_key, key, group)
        for header in group.interest.headers:
            _unlink(self._by_header, header, group)

    def route(self, messages: Sequence[KafkaMessage]) -> list[InterestGroup[Member]]:
        """The groups that may want some of ``messages``, each with :attr:`~InterestGroup.offered`
        holding those messages (in order, each once) until the next call."""
        self._routes += 1
        mark = self._routes
        touched: list[InterestGroup[Member]] = []
        by_key = self._by_key
        by_header = self._by_header
        for message in messages:
            key = message.key
            if key is not None and by_key:
                for group in by_key.get(key, ()):
                    if group._mark != mark:
                        group._mark = mark
                        group.offered = [message]
                        touched.append(group)
                    else:
                        group.offered.append(message)
            if by_header and message.headers:
                for header in message.headers:
                    for group in by_header.get(header, ()):
                        if group._mark != mark:
                            group._mark = mark
                            group.offered = [message]
                            touched.append(group)
                        elif group.offered[-1] is not message:
                            group.offered.append(message)
        return touched


def _unlink(
    table: dict[_K, list[InterestGroup[Member]]], entry: _K, group: InterestGroup[Member]
) -> None:
    groups = table[entry]
    groups.remove(group)
    if not groups:
        del table[entry]

"""Links between the workers of one ``start --workers N``, made before they are forked.

Some bindings do work once per host rather than once per worker: a kafka cache server's fetch
runs in worker 0, which passes what it read to the others
(:mod:`ssegate.bindings.kafka.host_fetch`). Such a binding needs a channel between worker 0 and
each other worker that exists before any of them starts, so the supervisor makes one Unix
socket pair per linked binding and worker 1 to N-1 (:func:`plan`), and each worker keeps only
its own ends (:meth:`LinkPlan.take`). Which binding kinds are linked is :data:`LINKED_KINDS`;
what travels on a link is the binding's business.

The sockets are inherited across ``fork`` and have no name in the filesystem, so only the
processes of this ``start`` ever hold them.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass

from ssegate.config.model import Config
from ssegate.host import switches

LINKED_KINDS: frozenset[tuple[str, str]] = frozenset({("kafka", "cache_server")})
"""Binding ``(type, kind)`` whose workers share work through worker 0."""
BUFFER_BYTES = 4 << 20
"""Each socket's kernel buffers: a few batches, so a worker's short pause does not stop the
one writing to it."""


@dataclass(frozen=True)
class WorkerLink:
    """One worker's ends of one binding's links."""

    worker: int
    """This worker's index; 0 is the one every other worker is linked to."""
    sockets: tuple[socket.socket, ...]
    """In worker 0, one socket to each other worker (1 to N-1, in order); in the others, the
    one socket to worker 0."""

    @property
    def first(self) -> bool:
        return self.worker == 0


@dataclass(frozen=True)
class LinkPlan:
    """Per linked binding, one socket pair per worker after the first: ``(worker 0's side,
    that worker's side)``."""

    pairs: Mapping[str, list[tuple[socket.socket, socket.socket]]]

    def take(self, worker: int) -> dict[str, WorkerLink]:
        """Worker ``worker``'s links (call in that worker, after the fork); every other socket
        is closed there."""
        links: dict[str, WorkerLink] = {}
        for binding, pairs in self.pairs.items():
            mine: list[socket.socket] = []
            for other, (first_side, other_side) in enumerate(pairs, start=1):
                keep = first_side if worker == 0 else other_side if worker == other else None
                for sock in (first_side, other_side):
                    if sock is not keep:
                        sock.close()
                if keep is not None:
                    mine.append(keep)
            links[binding] = WorkerLink(worker, tuple(mine))
        return links

    def close(self) -> None:
        """Close every socket (the supervisor, once the workers hold theirs)."""
        for pairs in self.pairs.values():
            for first_side, other_side in pairs:
                first_side.close()
                other_side.close()


def plan(config: Config, workers: int) -> LinkPlan:
    """The links ``workers`` workers need for the config's linked bindings (none for one, and
    none when ``SSEGATE_SHARED_FETCH=off``: each worker then fetches for itself)."""
    pairs: dict[str, list[tuple[socket.socket, socket.socket]]] = {}
    if workers <= 1 or not switches.SHARED_FETCH.on():
        return LinkPlan(pairs)
    for name, binding in config.bindings.items():
        if (binding.type, binding.kind) not in LINKED_KINDS:
            continue
        pairs[name] = []
        for _ in range(workers - 1):
            first_side, other_side = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            for sock in (first_side, other_side):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, BUFFER_BYTES)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, BUFFER_BYTES)
            pairs[name].append((first_side, other_side))
    return LinkPlan(pairs)

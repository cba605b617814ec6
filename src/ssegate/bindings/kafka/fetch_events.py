"""What the fetch thread and the event loop tell each other: plain immutable values.

Commands go from the loop to the thread (:class:`StartTopic`, :class:`CatchUp`,
:class:`EndCatchUp`); events come back, in the order they happened, as one list per hand-over
(:class:`TopicStarted`, :class:`PartitionsAdded`, :class:`Fetched`, :class:`CatchUpReset`,
:class:`CatchUpAtEnd`, :class:`BrokerStatus`, :class:`ClusterChanged`, :class:`TopicsListed`,
:class:`TopicMissing`). :class:`LogEnds` goes from the thread that fetches for the host to the
other workers' threads only, never through a loop's hand-over.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ssegate.bindings.kafka.repeats import Repeat
from ssegate.bindings.kafka.transforms import Unextracted
from ssegate.kafka.topics import DefaultOffset, KafkaMessage

# -- commands: loop → thread -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StartTopic:
    """Start the shared fetch of ``topic``: every partition, from the log start
    (``historical``) or from the end (``live``)."""

    topic: str
    default: DefaultOffset


@dataclass(frozen=True, slots=True)
class CatchUp:
    """Read ``topic``/``partition`` from ``offset`` with the catch-up reader (rewinding it if it
    is further on)."""

    topic: str
    partition: int
    offset: int
    ticket: int
    """Increases with every request for the partition; catch-up events carry the ticket of the
    latest request applied before they were read, so the loop knows whom they are for."""


@dataclass(frozen=True, slots=True)
class EndCatchUp:
    topic: str
    partition: int


Command = StartTopic | CatchUp | EndCatchUp

# -- events: thread → loop ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicStarted:
    topic: str
    starts: Mapping[int, int]
    """Partition → the offset the shared fetch starts at."""
    ends: Mapping[int, int]
    """Partition → its end (high watermark) when the fetch started: where ``live`` begins."""
    compacted: bool


@dataclass(frozen=True, slots=True)
class TopicMissing:
    topic: str
    reason: str


@dataclass(frozen=True, slots=True)
class PartitionsAdded:
    topic: str
    starts: Mapping[int, int]


@dataclass(frozen=True, slots=True)
class Fetched:
    """Consecutive records of one partition, as one consume call returned them."""

    topic: str
    partition: int
    messages: list[KafkaMessage]
    """The valid ones that are no repeat, offsets ascending."""
    next_offset: int
    """One past the last record fetched, valid or not."""
    invalid: list[tuple[int, str]] = field(default_factory=list)
    """``(offset, reason)`` of records the topic's check refused."""
    catch_up: bool = False
    """Read by the catch-up reader, not by the shared fetch."""
    ticket: int = 0
    repeats: list[Repeat] = field(default_factory=list)
    """Records passed over as repeats of an earlier copy (:mod:`~.repeats`)."""
    unextracted: list[Unextracted] = field(default_factory=list)
    """Fields the topic's transforms found nothing in (:mod:`~.transforms`)."""
    fetched: tuple[tuple[int, int], ...] = ()
    """``(first offset, ns since the epoch)`` of each fetch pass the batch holds records of,
    when it closed: stamped only while delivery tracing is on (:mod:`ssegate.telemetry.traces`)."""


@dataclass(frozen=True, slots=True)
class CatchUpReset:
    topic: str
    partition: int
    requested: int
    earliest: int
    ticket: int


@dataclass(frozen=True, slots=True)
class CatchUpAtEnd:
    """The catch-up reader reached the end of the partition, at ``offset``."""

    topic: str
    partition: int
    offset: int
    ticket: int


@dataclass(frozen=True, slots=True)
class BrokerStatus:
    available: bool
    reason: str = ""


@dataclass(frozen=True, slots=True)
class LeaderMoved:
    topic: str
    partition: int
    previous: int
    leader: int
    """The node id now leading the partition, -1 while it has none."""


@dataclass(frozen=True, slots=True)
class ClusterChanged:
    """A metadata answer differed from the one before: brokers left or joined the cluster
    (a node that stops heartbeating is fenced, and the cluster lists it no more), or partitions
    of started topics changed leader. The first answer is reported with ``first``."""

    brokers: Mapping[int, str]
    """Node id → ``host:port`` of every broker the cluster lists now."""
    left: Mapping[int, str] = field(default_factory=dict)
    joined: Mapping[int, str] = field(default_factory=dict)
    moves: tuple[LeaderMoved, ...] = ()
    first: bool = False


@dataclass(frozen=True, slots=True)
class TopicsListed:
    names: frozenset[str]


@dataclass(frozen=True, slots=True)
class LogEnds:
    """The log end offset (high watermark) of every partition the shared fetch reads, as the
    fetch last heard it from the brokers (:mod:`~.partition_lag`)."""

    ends: Mapping[tuple[str, int], int]


Event = (
    TopicStarted
    | TopicMissing
    | PartitionsAdded
    | Fetched
    | CatchUpReset
    | CatchUpAtEnd
    | BrokerStatus
    | ClusterChanged
    | TopicsListed
    | LogEnds
)

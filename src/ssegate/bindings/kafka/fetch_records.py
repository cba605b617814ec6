"""librdkafka's records of one partition turned into one :class:`~.fetch_events.Fetched` batch.

Used on the fetch thread (:mod:`~.fetcher`) for both of its readers, the shared fetch and the
catch-up reader: each record becomes a :class:`~ssegate.kafka.topics.KafkaMessage`, is checked
by its topic's :data:`~.message_check.MessageCheck` (a refused one is listed as invalid) and
given the key and headers the topic's transforms extract (:mod:`~.transforms`).

Repeats (:mod:`~.repeats`) are found here too, per reader and partition, and left out of the
batches like invalid records (``next_offset`` still moves past them). A reader handing a
partition over from offset ``X`` is assigned ``repeat_horizon`` offsets earlier
(:meth:`RecordBatches.reading_from`) and hands over nothing before ``X``: it reads those
records only for their ids. A record without headers costs one truth test.
"""

from __future__ import annotations

from collections.abc import Mapping

from confluent_kafka import Message

from ssegate.bindings.kafka.fetch_events import Fetched
from ssegate.bindings.kafka.message_check import MessageCheck
from ssegate.bindings.kafka.repeats import Repeat, RepeatFilter, record_id
from ssegate.bindings.kafka.transforms import TopicTransform, Unextracted
from ssegate.kafka.topics import KafkaMessage


class RecordBatches:
    """The checks, transforms and repeat filters the fetch thread's readers apply."""

    def __init__(
        self,
        checks: Mapping[str, MessageCheck],
        transforms: Mapping[str, TopicTransform] | None = None,
        repeat_horizon: int = 0,
    ) -> None:
        self._checks = checks
        """Per topic (the cache server may add to it after start)."""
        self._transforms = dict(transforms or {})
        """Per topic, the key and headers its records are given (:mod:`~.transforms`)."""
        self.repeat_horizon = repeat_horizon
        """Offsets back within which an id makes a record a repeat (:mod:`~.repeats`); 0: no
        record is a repeat."""
        self._repeats: dict[bool, dict[tuple[str, int], RepeatFilter]] = {False: {}, True: {}}
        """Per reader (catch-up or not), the repeat filter of each partition it reads."""

    def reading_from(self, catch_up: bool, topic: str, partition: int, start: int, low: int) -> int:
        """Where a reader handing over ``partition`` from ``start`` reads from: ``horizon``
        offsets earlier (not before the log start ``low``), to learn the ids there first."""
        if self.repeat_horizon <= 0:
            return start
        repeats = RepeatFilter(self.repeat_horizon, start)
        self._repeats[catch_up][(topic, partition)] = repeats
        return max(low, repeats.reading_from)

    def hands_over_from(self, catch_up: bool, key: tuple[str, int]) -> int:
        """The first offset the reader hands over of partition ``key`` (0 without a filter)."""
        repeats = self._repeats[catch_up].get(key)
        return repeats.start if repeats else 0

    def forget(self, catch_up: bool, key: tuple[str, int]) -> None:
        """The reader no longer reads partition ``key``."""
        self._repeats[catch_up].pop(key, None)

    def batch(
        self,
        topic: str,
        partition: int,
        records: list[Message],
        catch_up: bool,
        ticket: int = 0,
        fetched_ns: int = 0,
    ) -> Fetched | None:
        """The records as one batch for the loop, or ``None`` when all of them were read only
        to learn their ids (before the reader's :attr:`~.repeats.RepeatFilter.start`).
        ``fetched_ns``: when the fetch pass closed, stamped on the batch while delivery tracing
        is on (0: off)."""
        check = self._checks.get(topic)
        transform = self._transforms.get(topic)
        unextracted: list[Unextracted] = []
        repeats = self._repeats[catch_up].get((topic, partition))
        start = -1 if repeats is None else repeats.start
        messages: list[KafkaMessage] = []
        invalid: list[tuple[int, str]] = []
        skipped: list[Repeat] = []
        for record in records:
            offset = record.offset() or 0
            headers = headers_of(record)
            if headers and repeats is not None and (found := record_id(headers)) is not None:
                earlier = repeats.earlier_copy(offset, found)
                if earlier is not None and offset >= start:
                    skipped.append(Repeat(offset, earlier, found))
                    continue
            if offset < start:
                continue  # read to learn its id: the reader hands over from start
            message = KafkaMessage(
                topic,
                partition,
                offset,
                record.key(),
                record.value(),
                headers,
                record.timestamp()[1],
            )
            reason = check(message) if check is not None else None
            if reason is not None:
                invalid.append((offset, reason))
                continue
            if transform is not None:
                message, missed = transform.apply(message)
                unextracted.extend(missed)
            messages.append(message)
        next_offset = (records[-1].offset() or 0) + 1
        if next_offset <= start:
            return None
        stamp = ((messages[0].offset, fetched_ns),) if fetched_ns and messages else ()
        return Fetched(topic, partition, messages, next_offset, invalid, catch_up, ticket,
                       skipped, unextracted, stamp)  # fmt: skip


def headers_of(record: Message) -> tuple[tuple[str, bytes], ...]:
    """A record's headers as ``(name, bytes)`` pairs (a header without a value is ``b""``)."""
    headers = record.headers()
    if not headers:
        return ()
    pairs = headers.items() if isinstance(headers, dict) else headers
    return tuple(
        (name, value if isinstance(value, bytes) else (value or "").encode())
        for name, value in pairs
    )

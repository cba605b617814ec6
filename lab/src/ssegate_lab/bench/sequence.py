"""Per-stream sequence accounting of the load clients (pure): new, duplicated, skipped, late.

A benchmark's events carry a number that rises by one per event on every stream: the
publisher's ``id`` on the SSE proxy and on Mercure, the producer's sequence number ``n`` on
Kafka (each topic has one partition, so ``n`` stands for the partition offset; on the keyed
benchmark it counts per key, and a key lives on one partition). :class:`StreamSequence` holds
what one stream has seen and sorts each batch of numbers read from it:

- a number above the highest seen is **new**; the numbers it jumps over are **skipped** and
  kept as holes;
- a number in a hole is **late**: new, but out of order; the hole shrinks;
- any other number at or below the highest seen is a **duplicate**.

So a batch delivered twice counts its events once, plus as many duplicates: a client reports
every event it read, the duplicates among them, and the distinct ones (read - duplicates),
which is what is compared with what was owed (missing = owed - distinct). The first number a
stream sees sets its start, since a stream may join a sequence already under way: an event
lost before the first one shows as missing, not as skipped.

The common batch, exactly the numbers after the highest seen, is recognised with one list
comparison in C; only other batches are walked number by number. At most :data:`MAX_HOLES`
holes are kept; past that the oldest is forgotten, and a number arriving for it later counts
as a duplicate.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_HOLES = 4096


@dataclass(frozen=True, slots=True)
class BatchCounts:
    """What one batch held besides new events in order."""

    duplicates: int = 0
    skipped: int = 0
    late: int = 0


IN_ORDER = BatchCounts()


class StreamSequence:
    """The numbers one stream has seen: the highest, and the holes below it."""

    __slots__ = ("_holes", "highest")

    def __init__(self) -> None:
        self.highest: int | None = None
        self._holes: list[list[int]] = []
        """``[first, last]`` of each run of skipped numbers not yet arrived, oldest first."""

    def take(self, numbers: list[int]) -> BatchCounts:
        """Sort a batch of numbers, in the order they arrived."""
        if not numbers:
            return IN_ORDER
        first, count = numbers[0], len(numbers)
        if self.highest is None:
            self.highest = first - 1
        if (
            first == self.highest + 1
            and numbers[-1] == first + count - 1
            and numbers == list(range(first, first + count))
        ):
            self.highest = numbers[-1]
            return IN_ORDER
        return self._walk(numbers)

    @property
    def open_holes(self) -> int:
        """Skipped numbers that have not arrived since."""
        return sum(last - first + 1 for first, last in self._holes)

    def _walk(self, numbers: list[int]) -> BatchCounts:
        duplicates = skipped = late = 0
        highest = self.highest
        assert highest is not None
        holes = self._holes
        for number in numbers:
            if number > highest:
                if number > highest + 1:
                    skipped += number - highest - 1
                    holes.append([highest + 1, number - 1])
                    if len(holes) > MAX_HOLES:
                        del holes[0]
                highest = number
            elif self._fill(number):
                late += 1
            else:
                duplicates += 1
        self.highest = highest
        return BatchCounts(duplicates, skipped, late)

    def _fill(self, number: int) -> bool:
        """Take ``number`` out of the hole holding it; False when no hole holds it."""
        holes = self._holes
        for index in range(len(holes) - 1, -1, -1):  # late numbers are mostly recent ones
            first, last = holes[index]
            if number < first or number > last:
                continue
            if first == last:
                del holes[index]
            elif number == first:
                holes[index][0] = number + 1
            elif number == last:
                holes[index][1] = number - 1
            else:
                holes[index][1] = number - 1
                holes.insert(index + 1, [number + 1, last])
            return True
        return False

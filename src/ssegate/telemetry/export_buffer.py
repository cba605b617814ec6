"""A bounded buffer between what is observed and its exporter (log events, traced deliveries):
one class, so every signal drops and counts the same way when its collector is slow."""

from __future__ import annotations

from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")


class ExportBuffer(Generic[T]):
    """What waits for an exporter's next export: at most ``capacity`` items, the rest dropped
    and counted. Appending is safe from any thread (a ``deque`` append under the GIL), and so
    is taking (items are popped one by one, so none appended meanwhile is lost)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: deque[T] = deque()
        self.dropped = 0
        """Items refused since the last :meth:`take_dropped`."""

    def __len__(self) -> int:
        return len(self._items)

    def append(self, item: T) -> None:
        if len(self._items) >= self.capacity:
            self.dropped += 1
            return
        self._items.append(item)

    def take(self) -> list[T]:
        """Every item held, oldest first; the buffer is left empty."""
        taken = []
        items = self._items
        while items:
            taken.append(items.popleft())
        return taken

    def take_dropped(self) -> int:
        """How many items were dropped since the last call."""
        dropped, self.dropped = self.dropped, 0
        return dropped

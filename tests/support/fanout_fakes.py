"""Fakes for the fan-out write path: a transport's buffer without a socket, and a descriptor
writer that takes what it is told to (for :func:`ssegate.native.fanout.send_all`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class FakeSocket:
    fd: int

    def fileno(self) -> int:
        return self.fd


@dataclass
class FakeTransport:
    """What a transport holds unsent (``buffered``), whether it is closing, its extra info."""

    buffered: bytearray = field(default_factory=bytearray)
    closing: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def with_socket(cls, fd: int) -> FakeTransport:
        return cls(extra={"socket": FakeSocket(fd)})

    def write(self, data: bytes) -> None:
        self.buffered += data

    def get_write_buffer_size(self) -> int:
        return len(self.buffered)

    def is_closing(self) -> bool:
        return self.closing

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.extra.get(name, default)


@dataclass
class FdWriter:
    """A ``send_all``: per descriptor it takes what ``takes`` says (everything by default, a
    negative number is ``-errno``) and keeps what it took, per descriptor."""

    takes: dict[int, int] = field(default_factory=dict)
    calls: list[tuple[bytes, list[int]]] = field(default_factory=list)
    taken: dict[int, bytes] = field(default_factory=dict)

    def __call__(self, data: bytes, fds: Sequence[int]) -> list[int]:
        self.calls.append((data, list(fds)))
        written = []
        for fd in fds:
            n = self.takes.get(fd, len(data))
            self.taken[fd] = self.taken.get(fd, b"") + (data[:n] if n > 0 else b"")
            written.append(n)
        return written

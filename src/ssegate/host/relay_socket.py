"""The datagram socket a gateway process meets the others sharing its listening address on.

Each process binds a Unix datagram socket ``<pid>.sock`` in a directory of its own user named
after its listening addresses (:func:`relay_directory`), so exactly the processes that share
those addresses meet, and nothing else is needed. :class:`PeerSocket` sends a datagram to every
other socket of the directory (at most :data:`MAX_PEERS`), queues what a peer's full socket
queue refuses (at most :data:`MAX_BACKLOG` datagrams, each until its deadline), and reads what
arrives (at most :data:`READS_PER_WAKEUP` a wake-up). A socket left by a process that was
killed refuses datagrams and is removed once it is :data:`STALE_AFTER` seconds old.

What the datagrams say is :mod:`ssegate.host.relay_wire`'s; what a process does with them is
the challenge relay's (:mod:`ssegate.guards.relay`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import socket
import stat
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ssegate.telemetry import log

MAX_PEERS = 256
MAX_BACKLOG = 4096
"""Datagrams waiting for peers whose socket queue is full (Linux holds 10 per socket by
default, ``net.unix.max_dgram_qlen``)."""
FLUSH_EVERY = 0.002
READS_PER_WAKEUP = 64
STALE_AFTER = 10.0
SUN_PATH_MAX = 107


class RelayUnavailable(Exception):
    """The socket cannot be opened; the reason says why (the gateway runs on without it)."""


def relay_directory(addresses: Iterable[tuple[str, int]], base: Path | None = None) -> Path:
    """The directory the processes listening on ``addresses`` meet in: under ``base``
    (``$SSEGATE_RUNTIME_DIR``, else ``$XDG_RUNTIME_DIR/ssegate``, else ``ssegate-<uid>`` in
    the temporary directory), named by a digest of the sorted ``host:port`` list."""
    listed = "\n".join(sorted(f"{host}:{port}" for host, port in addresses))
    digest = hashlib.sha256(listed.encode()).hexdigest()[:16]
    return (base or _base_directory()) / digest


def _base_directory() -> Path:
    configured = os.environ.get("SSEGATE_RUNTIME_DIR")
    if configured:
        return Path(configured).absolute()
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "ssegate"
    return Path(tempfile.gettempdir()) / f"ssegate-{os.getuid()}"


def _private_directory(path: Path) -> None:
    """Make ``path`` (0700) or check that it is a directory of this user that only it may use."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        found = os.lstat(path)
    except OSError as exc:
        raise RelayUnavailable(f"cannot create {path}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():
        raise RelayUnavailable(f"{path} is not a directory owned by this user")
    if found.st_mode & 0o077:
        raise RelayUnavailable(f"{path} may be used by other users (mode {found.st_mode:o})")


class PeerSocket:
    """This process's socket in the directory of the processes sharing its address."""

    def __init__(self, sock: socket.socket, path: Path, unreachable: Callable[[], None]) -> None:
        self._sock = sock
        self.path = path
        self.directory = path.parent
        self._inode = os.lstat(path).st_ino
        self._unreachable = unreachable
        """Called for each datagram that could not reach its peer."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._backlog: dict[str, deque[tuple[float, bytes]]] = {}
        """Datagrams waiting for a peer whose queue was full, with when they stop being useful."""
        self._backlog_size = 0
        self._flushing: asyncio.TimerHandle | None = None

    @classmethod
    def bind(
        cls,
        addresses: Iterable[tuple[str, int]],
        unreachable: Callable[[], None],
        base: Path | None = None,
    ) -> PeerSocket:
        """Bind this process's socket; raises :class:`RelayUnavailable` with the reason."""
        directory = relay_directory(addresses, base)
        path = directory / f"{os.getpid()}.sock"
        if len(os.fsencode(path)) > SUN_PATH_MAX:
            raise RelayUnavailable(
                f"{path} is longer than a Unix socket path may be; set SSEGATE_RUNTIME_DIR"
                " to a shorter directory"
            )
        _private_directory(directory.parent)
        _private_directory(directory)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        sock.setblocking(False)
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)  # left by a killed process that had this pid
            sock.bind(os.fspath(path))
        except OSError as exc:
            sock.close()
            raise RelayUnavailable(f"cannot bind {path}: {exc.strerror or exc}") from None
        return cls(sock, path, unreachable)

    @property
    def open(self) -> bool:
        """Whether it is read (between :meth:`start` and :meth:`close`)."""
        return self._loop is not None

    def start(self, readable: Callable[[], None]) -> None:
        """Call ``readable`` on the running loop whenever datagrams arrived."""
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self._sock.fileno(), readable)

    def received(self, size: int) -> Iterator[tuple[bytes, object]]:
        """What arrived, ``(datagram, sender)``, up to :data:`READS_PER_WAKEUP` of them."""
        for _ in range(READS_PER_WAKEUP):
            try:
                yield self._sock.recvfrom(size)
            except OSError:  # nothing more to read, or the socket is gone
                return

    def is_peer(self, sender: object) -> bool:
        """Whether ``sender`` is a socket of this directory."""
        return isinstance(sender, str) and bool(sender) and Path(sender).parent == self.directory

    def peers(self) -> list[str]:
        """The other sockets of the directory, at most :data:`MAX_PEERS`."""
        peers: list[str] = []
        try:
            with os.scandir(self.directory) as entries:
                for entry in entries:
                    if entry.name.endswith(".sock") and entry.path != os.fspath(self.path):
                        peers.append(entry.path)
                        if len(peers) >= MAX_PEERS:
                            break
        except OSError:
            return []
        return peers

    def send(self, datagram: bytes, peer: str, wait: float) -> bool:
        """Send ``datagram`` to ``peer`` now, or queue it for up to ``wait`` seconds while the
        peer's queue is full (the kernel holds only a few datagrams per socket); ``False`` when
        it cannot reach it."""
        if peer not in self._backlog:
            try:
                self._sock.sendto(datagram, peer)
                return True
            except BlockingIOError:
                pass
            except ConnectionRefusedError:
                self._remove_stale(peer)
                return self._lost()
            except OSError:
                return self._lost()
        if self._backlog_size >= MAX_BACKLOG or self._loop is None:
            return self._lost()
        deadline = time.monotonic() + wait
        self._backlog.setdefault(peer, deque()).append((deadline, datagram))
        self._backlog_size += 1
        if self._flushing is None:
            self._flushing = self._loop.call_later(FLUSH_EVERY, self._flush)
        return True

    def close(self) -> None:
        """Stop reading, forget what waits, and remove this process's socket."""
        if self._loop is not None:
            self._loop.remove_reader(self._sock.fileno())
            self._loop = None
        if self._flushing is not None:
            self._flushing.cancel()
            self._flushing = None
        self._backlog.clear()
        self._sock.close()
        with contextlib.suppress(OSError):
            if os.lstat(self.path).st_ino == self._inode:
                os.unlink(self.path)

    def _flush(self) -> None:
        """Send what waits for peers whose queues were full; what waited too long is lost."""
        self._flushing = None
        now = time.monotonic()
        for peer, queued in list(self._backlog.items()):
            while queued:
                deadline, datagram = queued[0]
                if deadline >= now:
                    try:
                        self._sock.sendto(datagram, peer)
                    except BlockingIOError:
                        break
                    except OSError:
                        deadline = now - 1  # gone: what waits for it is lost
                if deadline < now:
                    self._lost()
                queued.popleft()
                self._backlog_size -= 1
            if not queued:
                del self._backlog[peer]
        if self._backlog and self._loop is not None:
            self._flushing = self._loop.call_later(FLUSH_EVERY, self._flush)

    def _lost(self) -> bool:
        self._unreachable()
        return False

    def _remove_stale(self, peer: str) -> None:
        """A socket nobody reads: its process was killed. Removed once old enough that it cannot
        be one a starting process has just bound."""
        with contextlib.suppress(OSError):
            if time.time() - os.lstat(peer).st_mtime > STALE_AFTER:
                os.unlink(peer)
                log.event("guard.relay_stale_removed", path=peer, pid=os.getpid())

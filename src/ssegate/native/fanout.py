"""The same bytes to many sockets in one call: :func:`send_all`.

``send_all(data, fds)`` sends ``data`` once to each file descriptor of ``fds``, in order,
without blocking, and answers per descriptor the bytes the kernel took (fewer than
``len(data)`` when its send queue filled up) or ``-errno`` (``-EAGAIN``: the queue was full,
``-EPIPE``/``-ECONNRESET``: the peer is gone). It never retries and never queues: what was not
taken is the caller's to queue, in order, behind what it sent (for a socket of an asyncio
transport, ``transport.write`` of the rest; :mod:`ssegate.bindings.tcp.fanout`).

Two implementations answer alike:

- ``native``: the C extension :mod:`ssegate.native._fanout` (``_fanout.c``), built by
  ``pip install`` (``setup.py``, so ``./run`` builds it) with the machine's C compiler. One
  Python call per group; a loop of ``send()`` with the GIL released.
- ``python``: a loop of ``os.write``, used where the extension was not built, or when
  ``SSEGATE_FANOUT=python`` is set in the environment (read at import; :func:`use` switches in
  a running process, for tests of both paths).

:data:`BACKEND` says which one :func:`send_all` is.

Why not ``io_uring``: it submits thousands of sends in one system call, but on loopback each
send's cost is the TCP work on both ends, not the system call's entry and exit. Measured with
``_fanout_probe.c`` (docs/performance.md, "The fan-out write path"), it saved too little CPU
per send to pay for a ring per process and a second code path.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Sequence
from typing import Literal

SendAll = Callable[[bytes, Sequence[int]], list[int]]
"""``(data, fds)`` → per descriptor, bytes taken or ``-errno``."""

Backend = Literal["native", "python"]

ENVIRONMENT = "SSEGATE_FANOUT"
"""``python`` forces the pure-Python loop even where the extension is built."""


def send_all_python(data: bytes, fds: Sequence[int]) -> list[int]:
    """The pure-Python :func:`send_all`: ``os.write`` per descriptor (sockets here are
    non-blocking, so a full send queue is ``EAGAIN``, not a wait)."""
    written: list[int] = []
    append = written.append
    write = os.write
    for fd in fds:
        if fd < 0:
            append(-errno.EBADF)
            continue
        try:
            append(write(fd, data))
        except BlockingIOError:
            append(-errno.EAGAIN)
        except OSError as exc:
            append(-(exc.errno or errno.EIO))
    return written


def _native() -> SendAll | None:
    try:
        from ssegate.native import _fanout  # type: ignore[attr-defined, unused-ignore]
    except ImportError:
        return None
    send: SendAll = _fanout.send_all
    return send


NATIVE = _native()
"""The C implementation, or ``None`` where the extension was not built."""


def use(backend: Backend) -> Backend:
    """Make :func:`send_all` the ``backend`` given (``native`` falls back to ``python`` where
    the extension is absent); returns the one now in use."""
    global send_all, BACKEND
    if backend == "native" and NATIVE is not None:
        send_all, BACKEND = NATIVE, "native"
    else:
        send_all, BACKEND = send_all_python, "python"
    return BACKEND


send_all: SendAll = send_all_python
BACKEND: Backend = "python"
use("python" if os.environ.get(ENVIRONMENT) == "python" else "native")

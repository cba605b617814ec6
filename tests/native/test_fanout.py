"""``send_all``, native and pure Python: the same bytes to many sockets, answered per socket."""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ssegate.native import fanout
from ssegate.native.fanout import SendAll

BACKENDS: dict[str, SendAll | None] = {"native": fanout.NATIVE, "python": fanout.send_all_python}


@pytest.fixture(params=sorted(BACKENDS))
def send_all(request: pytest.FixtureRequest) -> SendAll:
    send = BACKENDS[request.param]
    if send is None:
        pytest.skip("the C extension is not built (pip install -e . builds it; ./run does)")
    return send


def pair() -> tuple[socket.socket, socket.socket]:
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    return ours, theirs


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    held: list[socket.socket] = []
    yield held
    for sock in held:
        sock.close()


def test_every_socket_gets_the_bytes_once_and_says_how_many(
    send_all: SendAll, sockets: list[socket.socket]
) -> None:
    pairs = [pair() for _ in range(50)]
    sockets.extend(s for p in pairs for s in p)
    written = send_all(b"id:1\ndata:x\n\n", [ours.fileno() for ours, _ in pairs])
    assert written == [13] * 50
    for _, theirs in pairs:
        assert theirs.recv(100) == b"id:1\ndata:x\n\n"


def test_a_full_send_queue_takes_part_then_nothing_and_never_blocks(
    send_all: SendAll, sockets: list[socket.socket]
) -> None:
    ours, theirs = pair()
    sockets.extend((ours, theirs))
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    big = b"x" * 1_000_000
    first = send_all(big, [ours.fileno()])
    assert 0 < first[0] < len(big)
    assert send_all(big, [ours.fileno()]) == [-errno.EAGAIN]


def test_a_gone_peer_or_a_bad_descriptor_is_an_errno_and_the_others_still_get_theirs(
    send_all: SendAll, sockets: list[socket.socket]
) -> None:
    gone, peer = pair()
    peer.close()
    alive, theirs = pair()
    sockets.extend((gone, alive, theirs))
    written = send_all(b"hello", [gone.fileno(), -1, alive.fileno()])
    assert written == [-errno.EPIPE, -errno.EBADF, 5]
    assert theirs.recv(10) == b"hello"


def test_use_switches_the_backend_and_native_falls_back_where_it_is_absent() -> None:
    before = fanout.BACKEND
    try:
        assert fanout.use("python") == "python"
        assert fanout.send_all is fanout.send_all_python
        expected = "native" if fanout.NATIVE is not None else "python"
        assert fanout.use("native") == expected
    finally:
        fanout.use(before)


def test_the_environment_forces_the_pure_python_loop() -> None:
    src = Path(fanout.__file__).resolve().parents[2]
    env = {**os.environ, "SSEGATE_FANOUT": "python", "PYTHONPATH": str(src)}
    answer = subprocess.run(
        [sys.executable, "-c", "from ssegate.native import fanout; print(fanout.BACKEND)"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert answer.stdout.strip() == "python"

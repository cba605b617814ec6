"""HTTP/1.1 challenge answers extend their stream whichever process they land on.

Real ``ssegate start`` processes share one port (``--workers 2``, or two independent processes
with ``--reuse-port``) in front of the example SSE upstream in the test's own loop. Each stream
belongs to an identity of its own; its challenge is answered on fresh connections, which the
kernel spreads over the processes, until the process holding every stream has logged an answer
that reached it through another process (``guard.relayed_answer_applied``). Then, past the
first tokens' ``exp``, every stream is still open. Also here: whatever a local process writes
on the channel is dropped and counted, or verified and refused, never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ssegate.contract.guard import Answered
from ssegate.contract.identity import Identity
from ssegate.engine.runtime import free_port
from ssegate.guards.relay import ANSWER_WAIT, NOT_HELD, AnswerRelay, RelayedAnswer
from ssegate.host.relay_socket import STALE_AFTER, RelayUnavailable, relay_directory
from ssegate.host.relay_wire import Outcome, Renewal, decode, encode, new_id
from ssegate.telemetry.metrics import Metrics
from ssegate.tools.sse_server import ExampleSseServer
from ssegate_lab.bench.gateway import GatewayProcess

from .signing import AUDIENCE, ISSUER, jwks, token

pytestmark = pytest.mark.integration

CONFIG = """\
name: relay-test
telemetry:
  exporters:
    logs:
      type: stdout
    metrics:
      type: prometheus
      options:
        endpoints:
          - {{scheme: http, port: {metrics}, path: /metrics}}
guards:
  authn_jwt:
    type: jwt
    options:
      issuer: {issuer}
      audience: {audience}
      keys: {keys}
      challenge: 30
bindings:
  north_tcp_server:
    type: tcp
    kind: server
    options:
      host: 127.0.0.1
      port: {port}
    exit: north_http_server
  north_http_server:
    type: http
    kind: server
    options:
      authorization:
        authn_jwt:
          credentials:
            headers:
              authorization: Bearer {{credentials}}
    routes:
      - when:
          - headers:
              :path: /events
        exit: north_sse_server
  north_sse_server:
    type: sse
    kind: server
    options:
      keepalive: 1
    routes:
      - guarded:
          authn_jwt:
            - proxy:stream
        exit: south_sse_client
  south_sse_client:
    type: sse
    kind: client
    exit: south_http_client
  south_http_client:
    type: http
    kind: client
    options:
      versions:
        - http/1.1
    exit: south_tcp_client
  south_tcp_client:
    type: tcp
    kind: client
    options:
      host: 127.0.0.1
      port: {upstream}
"""

ANSWER = {"content-type": "application/x-challenge-response"}
STREAMS = 24
FIRST_TTL = 10
"""Seconds the first tokens live: the challenge (30 s before ``exp``) comes at once."""
ANSWER_TTL = 60
"""Seconds the answers' tokens live, at least: a stream extended by one outlives the test."""


class Fleet:
    """Gateway processes sharing one port, with their output."""

    def __init__(self, tmp: Path) -> None:
        self.port, self.upstream_port, self.metrics_port = free_port(), free_port(), free_port()
        self.config = tmp / "zilla.yaml"
        self.config.write_text(
            CONFIG.format(
                issuer=ISSUER,
                audience=AUDIENCE,
                keys=json.dumps(jwks()),
                port=self.port,
                upstream=self.upstream_port,
                metrics=self.metrics_port,
            )
        )
        self.processes: list[GatewayProcess] = []

    def process(self, *, workers: int = 1, reuse_port: bool = True) -> GatewayProcess:
        process = GatewayProcess(
            self.config, workers=workers, reuse_port=reuse_port, history=50_000
        )
        self.processes.append(process)
        return process

    def events(self, name: str) -> list[dict[str, object]]:
        """Every JSON log line ``name`` written so far, by any process."""
        found = []
        for process in self.processes:
            for line in list(process.output):
                if f'"event":"{name}"' in line:
                    found.append(json.loads(line))
        return found

    def wait_for(self, name: str, count: int, timeout: float = 15.0) -> list[dict[str, object]]:
        deadline = time.monotonic() + timeout
        while len(found := self.events(name)) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(found) >= count, f"{len(found)} {name} lines, wanted {count}"
        return found

    def output(self) -> str:
        return "\n".join(line for process in self.processes for line in list(process.output))

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            text: str = response.read().decode()
            return text


class Stream:
    """One HTTP/1.1 guarded stream: its first event, and when each later chunk arrived."""

    def __init__(self, identity: str, response: httpx.Response) -> None:
        self.identity = identity
        self.response = response
        self.arrivals: list[float] = []
        self.first: str = ""
        self.ended_at: float | None = None

    async def read(self) -> None:
        try:
            async for chunk in self.response.aiter_raw():
                if not self.first:
                    self.first = chunk.decode(errors="replace")
                self.arrivals.append(time.time())
        except httpx.HTTPError:
            pass
        self.ended_at = time.time()


async def post_answer(port: int, bearer: str) -> int:
    """Answer a challenge on a connection of its own (which process takes it is the kernel's
    choice); returns the status."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(
            "POST /events HTTP/1.1\r\nhost: 127.0.0.1\r\n"
            "content-type: application/x-challenge-response\r\n"
            f"authorization: Bearer {bearer}\r\n"
            "content-length: 0\r\nconnection: close\r\n\r\n".encode()
        )
        status_line = await asyncio.wait_for(reader.readline(), 10)
        return int(status_line.split()[1])
    finally:
        writer.close()


async def extend_across(fleet: Fleet) -> tuple[list[Stream], float, dict[int, int]]:
    """Open :data:`STREAMS` streams, answer each on fresh connections until an answer for every
    one has reached its holder through another process, and read on past the first ``exp``.
    Returns the streams, the latest first ``exp``, and the answers' statuses counted."""
    upstream = ExampleSseServer()
    await upstream.start(fleet.upstream_port)
    url = f"http://127.0.0.1:{fleet.port}/events"
    statuses: dict[int, int] = {}
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(upstream.close)
        client = await stack.enter_async_context(httpx.AsyncClient(timeout=30))
        streams: list[Stream] = []
        first_exp = 0
        for n in range(STREAMS):  # one connection each: a streaming response holds its own
            identity = f"user-{n}"
            first = token(sub=identity, ttl=FIRST_TTL)
            first_exp = max(first_exp, int(time.time()) + FIRST_TTL)
            request = client.build_request("GET", url, headers={"authorization": f"Bearer {first}"})
            response = await client.send(request, stream=True)
            stack.push_async_callback(response.aclose)
            assert response.status_code == 200, await response.aread()
            streams.append(Stream(identity, response))
        readers = [asyncio.create_task(stream.read()) for stream in streams]
        give_up = time.monotonic() + 60
        while not all(stream.first for stream in streams) and time.monotonic() < give_up:
            await asyncio.sleep(0.05)
        assert all("event:challenge" in stream.first for stream in streams)

        relayed: set[str] = set()
        ttl = ANSWER_TTL
        while len(relayed) < STREAMS and time.monotonic() < give_up:
            ttl += 1  # every round's tokens expire later than the last round's
            answered = await asyncio.gather(
                *(
                    post_answer(fleet.port, token(sub=stream.identity, ttl=ttl))
                    for stream in streams
                    if stream.identity not in relayed
                )
            )
            for status in answered:
                statuses[status] = statuses.get(status, 0) + 1
            await asyncio.sleep(0.2)  # the holder logged before replying; the pipe lags a little
            relayed = {str(e["identity"]) for e in fleet.events("guard.relayed_answer_applied")}
        assert len(relayed) == STREAMS, f"never relayed to their holder: {STREAMS - len(relayed)}"
        await asyncio.sleep(max(0.0, first_exp + 2 - time.time()))
        for reader in readers:
            reader.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
    return streams, first_exp, statuses


def check_extended_across(fleet: Fleet, pids: set[int]) -> None:
    streams, first_exp, statuses = asyncio.run(extend_across(fleet))
    assert statuses.keys() == {204}, statuses  # each answer extended a stream somewhere
    for stream in streams:  # none ended at its first exp: keep-alives came after it
        assert stream.ended_at is None or stream.ended_at > first_exp + 1.5, stream.identity
        assert stream.arrivals and stream.arrivals[-1] > first_exp + 0.5, stream.identity
    applied = fleet.events("guard.relayed_answer_applied")
    assert {int(str(e["pid"])) for e in applied} == pids  # both processes held streams
    assert all(str(e["origin"]) != str(e["pid"]) for e in applied)
    assert all(int(str(e["origin"])) in pids for e in applied)
    relayed = fleet.events("guard.answer_relayed")
    assert relayed and all(e["peers"] == 1 for e in relayed)
    assert not fleet.events("sse.authorization_expired")
    assert "Traceback" not in fleet.output()


def relay_pids(fleet: Fleet, count: int) -> set[int]:
    listening = fleet.wait_for("guard.relay_listening", count)
    pids = {int(str(e["pid"])) for e in listening}
    assert len(pids) == count
    return pids


def test_answers_reach_the_stream_on_the_other_worker(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path)
    with fleet.process(workers=2, reuse_port=False):
        check_extended_across(fleet, relay_pids(fleet, 2))


def test_answers_reach_the_stream_in_another_process_sharing_the_port(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path)
    with fleet.process(), fleet.process():
        check_extended_across(fleet, relay_pids(fleet, 2))


@pytest.fixture
def lone(tmp_path: Path) -> Iterator[tuple[Fleet, Path]]:
    """One process with its port shared (so its relay is open), and its socket's path."""
    fleet = Fleet(tmp_path)
    with fleet.process():
        listening = fleet.wait_for("guard.relay_listening", 1)
        yield fleet, Path(str(listening[0]["path"]))


def counter(metrics: str, name: str, **labels: str) -> float:
    for line in metrics.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_garbage_and_forged_messages_on_the_channel_are_dropped_and_counted(
    lone: tuple[Fleet, Path],
) -> None:
    fleet, gateway = lone
    peer_path = gateway.parent / "test-peer.sock"  # a local process posing as a peer
    peer = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    peer.bind(os.fspath(peer_path))
    peer.settimeout(5)
    stranger = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)  # unbound: cannot be replied to
    target = os.fspath(gateway)
    try:
        garbage = [
            b"garbage",
            b"\xff\xfe",
            b"[" * 10_000,  # nested deeper than any parser recursion allows
            b"{" * 20_000,  # longer than any datagram of the channel
            b"[]",
            b'{"v":1.0,"type":"renewal","id":"' + b"0" * 32 + b'","guard":"g","token":"t"}',
            b'{"v":1,"type":"renewal","id":"not-hex","guard":"authn_jwt","token":"t"}',
            b'{"v":1,"type":"renewal","id":"' + b"0" * 32 + b'","guard":"authn_jwt"}',
            b'{"v":1,"type":"shutdown","id":"' + b"0" * 32 + b'"}',
            encode(Renewal(new_id(), "no_such_guard", token())),
            encode(Outcome(new_id(), 5, 5, None)),  # answers nothing this process asked
        ]
        for datagram in garbage:
            peer.sendto(datagram, target)
        stranger.sendto(encode(Renewal(new_id(), "authn_jwt", token())), target)
        forged = token(sub="mallory", kid="rsa")[:-8] + "AAAAAAAA"  # signature broken
        replies = []
        for fresh in (forged, token()):
            peer.sendto(encode(Renewal(new_id(), "authn_jwt", fresh)), target)
            replies.append(decode(peer.recv(65536)))
    finally:
        peer.close()
        stranger.close()
        peer_path.unlink(missing_ok=True)
    # still serving: an HTTP/1.1 answer for a stream no process holds is a plain 403
    response = httpx.post(
        f"http://127.0.0.1:{fleet.port}/events",
        headers={**ANSWER, "authorization": f"Bearer {token()}"},
    )
    metrics = fleet.metrics()

    assert [(r.extended, r.held) for r in replies if isinstance(r, Outcome)] == [(0, 0), (0, 0)]
    assert response.status_code == 403
    assert "no stream of this identity to extend" in response.text
    dropped = "ssegate_guard_relay_dropped_total"
    expected = {
        "not_json": 3,
        "oversize": 1,
        "not_an_object": 1,
        "version": 1,
        "id": 1,
        "fields": 1,
        "type": 1,
        "unknown_guard": 1,
        "unknown_id": 1,
        "foreign_sender": 1,
    }
    assert {reason: counter(metrics, dropped, reason=reason) for reason in expected} == expected
    assert counter(metrics, "ssegate_guard_relay_refused_total", reason="token") == 1
    assert counter(metrics, "ssegate_guard_relay_not_held_total") == 1
    assert fleet.events("guard.relay_dropped")
    assert re.search(r'"event":"guard.relayed_answer_refused".*signature', fleet.output())
    assert "Traceback" not in fleet.output()


@pytest.fixture
def base() -> Iterator[Path]:
    """A short private directory for relays opened in this process (socket paths are short)."""
    with tempfile.TemporaryDirectory(prefix="relay-") as directory:
        yield Path(directory)


def test_a_socket_left_by_a_killed_process_is_removed_once_old(base: Path) -> None:
    async def scenario() -> tuple[RelayedAnswer, bool, bool, float]:
        relay = AnswerRelay.open([("127.0.0.1", 1)], {}, Metrics(), base=base)
        try:
            old, young = relay.directory / "1.sock", relay.directory / "2.sock"
            for path in (old, young):  # bound, then the process is gone: nobody reads them
                with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as dead:
                    dead.bind(os.fspath(path))
            past = time.time() - STALE_AFTER - 5
            os.utime(old, (past, past))
            started = time.monotonic()
            decided = await relay.relay(
                "g", token(), Identity("alice"), Answered(0, 0, "no stream here")
            )
            return decided, old.exists(), young.exists(), time.monotonic() - started
        finally:
            relay.close()

    decided, old_exists, young_exists, took = asyncio.run(scenario())
    assert decided == RelayedAnswer(0, 0, NOT_HELD)
    assert took < ANSWER_WAIT  # no live peer to wait for
    assert (old_exists, young_exists) == (False, True)


def test_a_directory_other_users_may_enter_is_not_used(base: Path) -> None:
    directory = relay_directory([("127.0.0.1", 1)], base)
    directory.mkdir(mode=0o755)
    directory.chmod(0o755)

    async def scenario() -> None:
        AnswerRelay.open([("127.0.0.1", 1)], {}, Metrics(), base=base)

    with pytest.raises(RelayUnavailable, match="may be used by other users"):
        asyncio.run(scenario())


def test_a_socket_path_too_long_for_unix_sockets_is_refused_with_the_remedy(base: Path) -> None:
    async def scenario() -> None:
        AnswerRelay.open([("127.0.0.1", 1)], {}, Metrics(), base=base / ("x" * 100))

    with pytest.raises(RelayUnavailable, match="SSEGATE_RUNTIME_DIR"):
        asyncio.run(scenario())

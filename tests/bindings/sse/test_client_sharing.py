"""Downstream streams of the same upstream request share one upstream connection.

Real sockets on 127.0.0.1 against the example upstream server; its ``streams`` set is the
number of upstream connections the gateway holds open.
"""

from __future__ import annotations

import asyncio

from tests.bindings.sse.test_client import (
    STREAM_HEAD,
    RecordingStream,
    chain,
    run,
    start_scripted,
    subscribe,
    until,
)

from ssegate.bindings.sse.checks import ContentCheck
from ssegate.bindings.sse.upstream import UpstreamFanout
from ssegate.sse_codec.parser import SseEvent, SseIdOnly
from ssegate.telemetry.metrics import Metrics
from ssegate.tools.sse_server import ExampleSseServer


def ids(stream: RecordingStream) -> list[str]:
    return [e.id for e in stream.events()]


def test_two_downstreams_share_one_upstream_connection_until_the_last_leaves() -> None:
    async def scenario() -> None:
        upstream = ExampleSseServer()
        await upstream.start()
        server = chain(upstream.http_port)
        first = subscribe(server)
        second = subscribe(server)
        await until(lambda: first.statuses == [200] and second.statuses == [200])
        assert len(upstream.streams) == 1
        for text in ("one", "two", "three"):
            upstream.publish(text)
        await until(lambda: len(second.events()) == 3)
        assert first.body == second.body
        assert [(e.id, e.data) for e in first.events()] == [
            ("1", "one"),
            ("2", "two"),
            ("3", "three"),
        ]
        first.peer_goes_away()
        upstream.publish("four")
        await until(lambda: len(second.events()) == 4)
        assert len(upstream.streams) == 1
        second.peer_goes_away()
        await until(lambda: not upstream.streams)
        await upstream.close()

    run(scenario)


def test_a_joiner_at_the_shared_id_shares_and_one_without_an_id_gets_the_id_written() -> None:
    async def scenario() -> None:
        upstream = ExampleSseServer()
        await upstream.start()
        server = chain(upstream.http_port)
        first = subscribe(server)
        await until(lambda: len(upstream.streams) == 1)
        upstream.publish("a")
        upstream.publish("b")
        await until(lambda: len(first.events()) == 2)
        at_head = subscribe(server, {"last-event-id": "2"})
        fresh = subscribe(server)
        await until(lambda: at_head.statuses == [200] and fresh.statuses == [200])
        assert len(upstream.streams) == 1
        upstream.publish("c")
        await until(lambda: len(at_head.events()) == 1 and len(fresh.events()) == 1)
        assert ids(first) == ["1", "2", "3"]
        assert ids(at_head) == ["3"]
        assert ids(fresh) == ["3"]
        for stream in (first, at_head, fresh):
            stream.peer_goes_away()
        await until(lambda: not upstream.streams)
        await upstream.close()

    run(scenario)


def test_a_late_joiner_with_an_old_id_gets_its_replay_then_shares() -> None:
    async def scenario() -> None:
        upstream = ExampleSseServer()
        await upstream.start()
        for text in ("a", "b", "c"):
            upstream.publish(text)
        server = chain(upstream.http_port)
        live = subscribe(server)
        await until(lambda: len(upstream.streams) == 1)
        upstream.publish("d")
        await until(lambda: ids(live) == ["4"])
        late = subscribe(server, {"last-event-id": "1"})
        await until(lambda: ids(late) == ["2", "3", "4"])
        await until(lambda: len(upstream.streams) == 1)
        assert server.metrics.total("ssegate.sse.upstream_merges") == 1
        upstream.publish("e")
        await until(lambda: len(late.events()) == 4 and len(live.events()) == 2)
        await asyncio.sleep(0.05)
        assert [(e.id, e.data) for e in late.events()] == [
            ("2", "b"),
            ("3", "c"),
            ("4", "d"),
            ("5", "e"),
        ]
        assert ids(live) == ["4", "5"]
        live.peer_goes_away()
        late.peer_goes_away()
        await until(lambda: not upstream.streams)
        await upstream.close()

    run(scenario)


def test_shared_upstream_restart_is_resumed_for_all_without_loss_or_repeats() -> None:
    async def scenario() -> None:
        upstream = ExampleSseServer()
        await upstream.start()
        port = upstream.http_port
        server = chain(port)
        streams = [subscribe(server) for _ in range(3)]
        await until(lambda: all(s.statuses == [200] for s in streams))
        upstream.publish("1")
        upstream.publish("2")
        await until(lambda: all(len(s.events()) == 2 for s in streams))
        await upstream.close()
        upstream.publish("3")  # kept in the history while the stream port is down
        upstream.publish("4")
        await asyncio.sleep(0.1)
        await upstream.start(http_port=port)
        await until(lambda: len(upstream.streams) == 1)
        upstream.publish("5")
        await until(lambda: all(len(s.events()) == 5 for s in streams))
        await asyncio.sleep(0.05)
        for stream in streams:
            assert ids(stream) == ["1", "2", "3", "4", "5"]
            assert stream.statuses == [200]
            assert not stream.ended
        assert len(upstream.streams) == 1
        assert server.metrics.total("ssegate.sse.upstream_reconnects") >= 1
        for stream in streams:
            stream.peer_goes_away()
        await upstream.close()

    run(scenario)


def test_a_slow_subscriber_is_closed_alone() -> None:
    async def scenario() -> None:
        upstream = ExampleSseServer()
        await upstream.start()
        server = chain(upstream.http_port)
        slow = subscribe(server)
        quick = subscribe(server)
        await until(lambda: slow.statuses == [200] and quick.statuses == [200])
        slow.buffered = server.max_buffered + 1
        upstream.publish("x")
        await until(lambda: slow.was_aborted and len(quick.events()) == 1)
        upstream.publish("y")
        await until(lambda: len(quick.events()) == 2)
        assert len(upstream.streams) == 1
        assert server.metrics.total("ssegate.sse.slow_clients") == 1
        quick.peer_goes_away()
        await until(lambda: not upstream.streams)
        await upstream.close()

    run(scenario)


def test_every_sharer_of_a_refused_upstream_is_answered_502() -> None:
    async def scenario() -> None:
        head = b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n"

        async def refuse(transport: asyncio.Transport) -> None:
            await asyncio.sleep(0.05)
            transport.write(head)

        listener, upstream, port = await start_scripted(refuse)
        server = chain(port)
        both = [subscribe(server), subscribe(server)]
        await until(lambda: all(s.ended for s in both))
        assert [s.statuses for s in both] == [[502], [502]]
        assert len(upstream.requests) == 1
        listener.close()

    run(scenario)


def test_the_end_of_a_shared_upstream_ends_every_sharer() -> None:
    async def scenario() -> None:
        sent = asyncio.Event()

        async def one_event_then_close(transport: asyncio.Transport) -> None:
            transport.write(STREAM_HEAD)
            await sent.wait()
            transport.write(b"id:1\ndata:x\n\n")
            await asyncio.sleep(0.02)
            transport.close()

        async def no_content(transport: asyncio.Transport) -> None:
            transport.write(b"HTTP/1.1 204 No Content\r\n\r\n")

        listener, upstream, port = await start_scripted(one_event_then_close, no_content)
        server = chain(port)
        both = [subscribe(server), subscribe(server)]
        await until(lambda: all(s.statuses == [200] for s in both))
        sent.set()
        await until(lambda: all(s.ended for s in both))
        for stream in both:
            assert not stream.was_reset
            assert ids(stream) == ["1"]
        assert b"last-event-id: 1\r\n" in upstream.requests[1]
        listener.close()

    run(scenario)


def accept_all(data: str) -> str | None:
    return None


class RecordingSink:
    """An SseSink that keeps what it was given, optionally as a sink that checks events."""

    timestamps = False

    def __init__(self, validates: bool = False) -> None:
        self.check = ContentCheck(accept_all, "north_sse_server", Metrics()) if validates else None
        self.calls: list[tuple[str | None, str | None, str | None]] = []
        self.encoded = b""
        self.opened = False

    def open(self) -> None:
        self.opened = True

    def event(
        self,
        data: str | None,
        *,
        event: str | None = None,
        id: str | None = None,
        timestamp: int = 0,
    ) -> None:
        self.calls.append((data, event, id))

    def write_encoded(self, data: bytes) -> None:
        self.encoded += data

    def comment(self, text: str = "") -> None:
        pass

    def end(self) -> None:
        pass

    def fail(self, status: int, reason: str) -> None:
        pass

    @property
    def closed(self) -> bool:
        return False


def test_fanout_encodes_once_and_hands_validating_sinks_each_event() -> None:
    fanout = UpstreamFanout("", lambda: None)
    plain, checked = RecordingSink(), RecordingSink(validates=True)
    fanout.add(plain, "")
    fanout.add(checked, "")
    items = [SseEvent("message", "a", "1"), SseEvent("tick", "b", "1"), SseIdOnly("2")]
    blocks, marks = fanout.deliver(items)
    assert plain.encoded == b"".join(blocks) == b"id:1\ndata:a\n\nevent:tick\ndata:b\n\nid:2\n\n"
    assert marks == ["1", None, "2"]
    assert checked.calls == [("a", None, "1"), ("b", "tick", None), (None, None, "2")]
    assert checked.encoded == b""
    assert fanout.relayed_id == "2" and fanout.exact


def test_in_step_members_of_an_opened_fanout_are_written_as_one_group() -> None:
    fanout = UpstreamFanout("5", lambda: None)
    early, behind = RecordingSink(), RecordingSink()
    first = fanout.add(early, "5")
    lagging = fanout.add(behind, "")  # no id while the fanout's is 5: not in step
    assert not first.grouped  # not opened yet: nothing is written to a group
    fanout.open()
    assert first.grouped and not lagging.grouped
    fanout.deliver([SseEvent("message", "a", "6")])
    assert early.encoded == b"id:6\ndata:a\n\n"  # the group's shared bytes
    assert behind.calls == [("a", None, "6")]  # its own write, the id written out
    assert lagging.in_step and lagging.grouped  # in step now: it joins the group
    fanout.deliver([SseEvent("message", "b", "7")])
    assert early.encoded == b"id:6\ndata:a\n\nid:7\ndata:b\n\n"
    assert behind.encoded == b"id:7\ndata:b\n\n"  # the shared bytes from now on
    late = RecordingSink()
    joined = fanout.add(late, "7")
    assert late.opened and joined.grouped  # opened at once, and in the group
    lagging.cancel()
    assert not lagging.grouped
    fanout.deliver([SseEvent("message", "c", "8")])
    assert early.encoded.endswith(b"id:8\ndata:c\n\n") and late.encoded == b"id:8\ndata:c\n\n"
    assert not behind.encoded.endswith(b"id:8\ndata:c\n\n")


def test_a_member_whose_client_stops_reading_is_written_what_it_missed_once_it_reads() -> None:
    fanout = UpstreamFanout("", lambda: None)
    reading, stopped, checked = RecordingSink(), RecordingSink(), RecordingSink(validates=True)
    members = [fanout.add(sink, "") for sink in (reading, stopped, checked)]
    fanout.open()
    fanout.deliver([SseEvent("message", "a", "1")])
    members[1].pace(True)
    members[2].pace(True)
    assert not members[1].grouped
    fanout.deliver([SseEvent("message", "b", "2")])
    fanout.deliver([SseEvent("message", "c", "3")])
    assert stopped.encoded == b"id:1\ndata:a\n\n"  # nothing more while it reads nothing
    assert len(fanout._log) == 2  # kept once for both stopped members
    members[1].pace(False)
    assert stopped.encoded == reading.encoded  # what it missed, in order, then with the others
    assert members[1].grouped
    members[2].pace(False)  # a checking sink gets its missed items one by one, checked
    assert [call[0] for call in checked.calls] == ["a", "b", "c"]
    assert len(fanout._log) == 0  # nobody is owed anything: the log keeps nothing
    fanout.deliver([SseEvent("message", "d", "4")])
    assert stopped.encoded == reading.encoded


def test_a_stopped_member_that_leaves_releases_its_place_and_one_that_ends_gets_its_due() -> None:
    fanout = UpstreamFanout("", lambda: None)
    gone, ending = RecordingSink(), RecordingSink()
    members = [fanout.add(sink, "") for sink in (gone, ending)]
    fanout.open()
    members[0].pace(True)
    fanout.deliver([SseEvent("message", "a", "1")])
    members[0].cancel()
    assert len(fanout._log) == 0
    members[1].pace(True)
    fanout.deliver([SseEvent("message", "b", "2")])
    fanout.end()  # the upstream ended: what it missed goes first
    assert ending.encoded == b"id:1\ndata:a\n\nid:2\ndata:b\n\n"

"""The one fetch per host: its wire, its framing, and its two ends over real socket pairs."""

from __future__ import annotations

import socket

import pytest

from ssegate.bindings.kafka.fetch_events import (
    BrokerStatus,
    CatchUpAtEnd,
    CatchUpReset,
    Fetched,
    StartTopic,
    TopicStarted,
)
from ssegate.bindings.kafka.host_fetch import (
    LEADER_GONE,
    FollowerEnd,
    Frames,
    LeaderEnd,
    WireError,
    decode_command,
    decode_events,
    encode_command,
    encode_events,
    end_of,
    frame,
)
from ssegate.bindings.kafka.repeats import Repeat
from ssegate.host.worker_links import WorkerLink
from ssegate.kafka.topics import KafkaMessage

LIVE = Fetched(
    "prices",
    2,
    [
        KafkaMessage("prices", 2, 40, b"k1", b"v40", (("zone", b"north"),), 1_700_000_000_000),
        KafkaMessage("prices", 2, 42, b"k2", None),  # a tombstone, no headers
    ],
    next_offset=44,
    invalid=[(41, "not JSON")],
    repeats=[Repeat(43, 40, b"id-40")],
)
STARTED = TopicStarted("prices", {0: 0, 1: 5, 2: 40}, {0: 3, 1: 9, 2: 44}, compacted=True)


def payload(data: bytes) -> bytes:
    (only,) = Frames().feed(data)
    return only


def test_the_shared_fetch_events_cross_the_wire_unchanged() -> None:
    data = encode_events([STARTED, LIVE, BrokerStatus(False, "all brokers down")])
    assert data is not None
    assert decode_events(payload(data)) == [STARTED, LIVE, BrokerStatus(False, "all brokers down")]


def test_the_catch_up_readers_batches_and_answers_stay_with_the_leader() -> None:
    own = [
        Fetched("prices", 0, [KafkaMessage("prices", 0, 1, None, b"x")], 2, catch_up=True),
        CatchUpReset("prices", 0, 0, 1, ticket=3),
        CatchUpAtEnd("prices", 0, 2, ticket=3),
    ]
    assert encode_events(own) is None
    data = encode_events([*own, LIVE])
    assert data is not None
    assert decode_events(payload(data)) == [LIVE]


def test_frames_come_out_whole_however_the_stream_is_cut() -> None:
    data = frame(["a"]) + frame(["b" * 1000]) + frame(["c"])
    frames = Frames()
    found = []
    for start in range(0, len(data), 7):
        found.extend(frames.feed(data[start : start + 7]))
    assert [decode_events(p) for p in found] == [["a"], ["b" * 1000], ["c"]]
    assert frames.feed(b"") == []


def test_a_frame_that_is_not_what_the_other_end_writes_is_refused() -> None:
    with pytest.raises(WireError, match="not StartTopic"):
        decode_command(payload(frame(["prices"])))
    with pytest.raises(WireError, match="unreadable"):
        decode_events(b"not a pickle")
    assert decode_command(payload(encode_command(StartTopic("prices", "live")))) == StartTopic(
        "prices", "live"
    )


def pair() -> tuple[LeaderEnd, list[FollowerEnd]]:
    sockets = [socket.socketpair() for _ in range(2)]
    leader = LeaderEnd([mine for mine, _ in sockets])
    return leader, [FollowerEnd(theirs) for _, theirs in sockets]


def test_the_leader_broadcasts_to_every_follower_and_hears_their_topic_starts() -> None:
    leader, followers = pair()
    leader.broadcast([STARTED, LIVE, CatchUpAtEnd("prices", 0, 2, ticket=1)])
    for follower in followers:
        assert follower.read(timeout=1.0) == [STARTED, LIVE]
        assert follower.read(timeout=0.0) == []
    followers[1].ask(StartTopic("orders", "historical"))
    followers[0].ask(StartTopic("prices", "live"))
    asked = []
    for _ in range(50):
        asked.extend(leader.commands())
        if len(asked) == 2:
            break
    assert sorted(asked, key=lambda c: c.topic) == [
        StartTopic("orders", "historical"),
        StartTopic("prices", "live"),
    ]
    leader.close()
    for follower in followers:
        follower.close()


def test_a_follower_whose_leader_is_gone_says_the_broker_is_unavailable_once() -> None:
    leader, followers = pair()
    leader.close()
    follower = followers[0]
    assert follower.read(timeout=1.0) == [BrokerStatus(False, LEADER_GONE)]
    assert not follower.connected
    assert follower.read(timeout=0.0) == []
    follower.ask(StartTopic("prices", "live"))  # nowhere to go, and no error


def test_the_leader_stops_writing_to_a_follower_that_is_gone() -> None:
    leader, followers = pair()
    followers[0].close()
    for _ in range(3):  # the first send may still succeed into the closed peer's buffer
        leader.broadcast([LIVE])
    assert leader.followers == 1
    assert followers[1].read(timeout=1.0)[0] == LIVE


def test_worker_0s_link_is_the_leaders_end_and_every_others_a_followers() -> None:
    first, other = socket.socketpair()
    assert end_of(None) is None
    leader = end_of(WorkerLink(0, (first,)))
    follower = end_of(WorkerLink(1, (other,)))
    assert isinstance(leader, LeaderEnd) and leader.followers == 1
    assert isinstance(follower, FollowerEnd)
    leader.broadcast([LIVE])
    assert follower.read(timeout=1.0) == [LIVE]
    leader.close()
    follower.close()

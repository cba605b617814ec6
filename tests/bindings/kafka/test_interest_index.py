"""The interest index: a batch reaches only the groups that may want its messages."""

from __future__ import annotations

from ssegate.bindings.kafka.interest_index import InterestIndex
from ssegate.kafka.topics import Interest, KafkaMessage


def message(offset: int, key: bytes | None, *headers: tuple[str, bytes]) -> KafkaMessage:
    return KafkaMessage("t", 0, offset, key, b"v", tuple(headers))


def keys(*names: bytes) -> Interest:
    return Interest(frozenset(names))


def test_a_batch_reaches_only_the_groups_whose_key_it_carries() -> None:
    index: InterestIndex[str] = InterestIndex()
    for n in range(10_000):
        index.add(f"s{n}", keys(f"k{n}".encode()))
    batch = [message(0, b"k7"), message(1, b"nobody"), message(2, b"k7"), message(3, b"k9")]
    routed = {tuple(g.members): [m.offset for m in g.offered] for g in index.route(batch)}
    assert routed == {("s7",): [0, 2], ("s9",): [3]}


def test_subscribers_with_one_interest_share_one_group_and_one_list() -> None:
    index: InterestIndex[str] = InterestIndex()
    for name in ("a", "b", "c"):
        index.add(name, keys(b"acme"))
    (group,) = index.route([message(5, b"acme")])
    assert list(group.members) == ["a", "b", "c"] and index.groups == 1
    assert [m.offset for m in group.offered] == [5]


def test_a_header_interest_matches_the_name_and_value_pair_only() -> None:
    index: InterestIndex[str] = InterestIndex()
    index.add("acme", Interest(headers=frozenset({("tenant", b"acme")})))
    batch = [
        message(0, None, ("tenant", b"globex")),
        message(1, None, ("region", b"acme")),
        message(2, b"x", ("tenant", b"acme"), ("tenant", b"acme")),
    ]
    (group,) = index.route(batch)
    assert [m.offset for m in group.offered] == [2]


def test_a_message_matching_a_group_twice_is_offered_once() -> None:
    index: InterestIndex[str] = InterestIndex()
    index.add("s", Interest(frozenset({b"k"}), frozenset({("tenant", b"acme")})))
    (group,) = index.route([message(0, b"k", ("tenant", b"acme")), message(1, b"z")])
    assert [m.offset for m in group.offered] == [0]


def test_the_last_member_out_removes_its_group_and_entries() -> None:
    index: InterestIndex[str] = InterestIndex()
    index.add("a", keys(b"k"))
    index.add("b", keys(b"k"))
    index.discard("a")
    assert [list(g.members) for g in index.route([message(0, b"k")])] == [["b"]]
    index.discard("b")
    index.discard("b")
    assert index.route([message(1, b"k")]) == [] and len(index) == 0 and index.groups == 0


def test_adding_a_member_again_moves_it_to_its_new_interest() -> None:
    index: InterestIndex[str] = InterestIndex()
    index.add("a", keys(b"old"))
    index.add("a", keys(b"new"))
    assert index.route([message(0, b"old")]) == []
    assert [list(g.members) for g in index.route([message(1, b"new")])] == [["a"]]


def test_interest_may_want_is_key_or_any_named_header() -> None:
    interest = Interest(frozenset({b"k"}), frozenset({("h", b"1")}))
    assert interest.may_want(message(0, b"k"))
    assert interest.may_want(message(0, None, ("h", b"1")))
    assert not interest.may_want(message(0, None, ("h", b"2")))
    assert not interest.may_want(message(0, b"other"))

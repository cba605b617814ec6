"""The sse-kafka proxy against an in-memory topic log: routes, ids, resume, refusals, filters."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest
from tests.support.guards import TableGuard
from tests.support.schema_errors import binding_errors

from ssegate.bindings.sse_kafka import resume_points
from ssegate.bindings.sse_kafka.event_id import decode_progress, encode_progress
from ssegate.bindings.sse_kafka.proxy import SseKafkaProxy, compile_route
from ssegate.bindings.sse_kafka.shared import EncodedMessages, encode_message
from ssegate.config.errors import ConfigError
from ssegate.config.model import Route
from ssegate.contract.exchange import Request
from ssegate.kafka.topics import KafkaMessage, LivePositions
from ssegate.sse_codec.parser import SseEvent, SseIdOnly
from ssegate.telemetry.metrics import Metrics

from .topic_log import TopicLog, WireSink


def route(
    log: TopicLog, path: str = "/{topic}", with_: dict[str, Any] | None = None, **extra: Any
) -> Any:
    config = Route(
        exit="cache",
        when=[{"path": path}],
        with_={"topic": "${params.topic}"} if with_ is None else with_,
        path="bindings.p.routes[0]",
        **extra,
    )
    return compile_route(config, log, config.path)


def proxy(*routes: Any) -> SseKafkaProxy:
    return SseKafkaProxy("north_sse_kafka_mapping", list(routes), Metrics())


def request(path: str, **identities: object) -> Request:
    return Request("GET", "https", "localhost", path, {}, identities=dict(identities))


def subscribe(p: SseKafkaProxy, path: str, last_id: str | None = None) -> WireSink:
    sink = WireSink()
    p.subscribe(request(path), last_id, sink)
    return sink


@pytest.fixture
def log() -> TopicLog:
    topics = TopicLog()
    topics.create("events", 2)
    return topics


def test_messages_become_events_whose_ids_carry_the_next_offset_per_partition(
    log: TopicLog,
) -> None:
    log.append("events", 0, b"a", b"zero")
    log.append("events", 0, b"a", b"one")
    sink = subscribe(proxy(route(log)), "/events")
    log.append("events", 1, b"b", b"two")
    assert sink.opened
    assert [(e.data, e.id) for e in sink.events()] == [
        ("zero", encode_progress({0: 1})),
        ("one", encode_progress({0: 2})),
        ("two", "AQQABAIC"),
    ]


def test_the_wire_is_id_then_data_without_spaces(log: TopicLog) -> None:
    log.append("events", 0, None, b"hello")
    sink = subscribe(proxy(route(log)), "/events")
    assert bytes(sink.wire) == b"id:AQIAAg==\ndata:hello\n\n"


def test_a_last_event_id_resumes_listed_partitions_after_their_offsets(log: TopicLog) -> None:
    for n in range(3):
        log.append("events", 0, None, f"p0-{n}".encode())
        log.append("events", 1, None, f"p1-{n}".encode())
    sink = subscribe(proxy(route(log)), "/events", "AQQABAIC")  # p0→2, p1→1
    assert log.starts[-1] == {0: 2, 1: 1}
    assert [e.data for e in sink.events()] == ["p0-2", "p1-1", "p1-2"]
    assert decode_progress(sink.events()[-1].id) == {0: 3, 1: 3}


def test_partitions_not_in_the_id_start_from_the_default(log: TopicLog) -> None:
    log.append("events", 0, None, b"p0")
    log.append("events", 1, None, b"p1")
    sink = subscribe(proxy(route(log)), "/events", encode_progress({0: 1}))
    assert [e.data for e in sink.events()] == ["p1"]


def test_the_etag_header_is_appended_to_the_id(log: TopicLog) -> None:
    log.append("events", 0, None, b"v", (("etag", b"revision=42"),))
    sink = subscribe(proxy(route(log)), "/events")
    assert sink.events()[0].id == f"{encode_progress({0: 1})}/revision=42"


def test_the_key_form_puts_base64_key_and_progress_in_a_json_array(log: TopicLog) -> None:
    log.append("events", 0, b"key", b"v")
    log.append("events", 0, None, b"w")
    with_ = {"topic": "${params.topic}", "event": {"id": '["${base64(key)}","${etag}"]'}}
    sink = subscribe(proxy(route(log, with_=with_)), "/events")
    ids = [e.id for e in sink.events()]
    assert ids == [
        f'["a2V5","{encode_progress({0: 1})}"]',
        f'[null,"{encode_progress({0: 2})}"]',
    ]
    assert json.loads(ids[0])[0] == "a2V5"
    resumed = subscribe(proxy(route(log, with_=with_)), "/events", ids[0])
    assert [e.data for e in resumed.events()] == ["w"]


def test_a_tombstone_is_a_delete_event_carrying_the_key(log: TopicLog) -> None:
    log.append("events", 0, b"key-1", None)
    sink = subscribe(proxy(route(log)), "/events")
    [event] = sink.events()
    assert (event.type, event.data) == ("delete", base64.urlsafe_b64encode(b"key-1").decode())


def test_values_that_are_not_utf8_are_replaced_not_dropped(log: TopicLog) -> None:
    log.append("events", 0, None, b"caf\xe9")
    assert subscribe(proxy(route(log)), "/events").events()[0].data == "caf\ufffd"


def test_multi_line_values_become_several_data_lines(log: TopicLog) -> None:
    log.append("events", 0, None, b"a\nb")
    sink = subscribe(proxy(route(log)), "/events")
    assert b"data:a\ndata:b\n" in sink.wire
    assert sink.events()[0].data == "a\nb"


def test_an_undecodable_last_event_id_is_a_400_with_the_reason(log: TopicLog) -> None:
    p = proxy(route(log))
    sink = subscribe(p, "/events", "AQQA+AIC")
    assert sink.failed is not None
    status, reason = sink.failed
    assert status == 400
    assert "not URL-safe base64" in reason
    assert not log.subscriptions
    assert p.metrics.counter("ssegate.sse_kafka.bad_last_event_ids", p.name) == 1


def test_an_unknown_topic_is_404(log: TopicLog) -> None:
    sink = subscribe(proxy(route(log)), "/nope")
    assert sink.failed == (404, "topic 'nope' does not exist")


def test_a_topic_name_kafka_cannot_have_is_404(log: TopicLog) -> None:
    sink = subscribe(proxy(route(log)), "/a b")
    assert sink.failed is not None and sink.failed[0] == 404


def test_a_path_no_route_matches_is_404(log: TopicLog) -> None:
    sink = subscribe(proxy(route(log, "/streams/{topic}")), "/events")
    assert sink.failed is not None and sink.failed[0] == 404


def test_a_guarded_route_refuses_requests_without_the_identity(log: TopicLog) -> None:
    p = SseKafkaProxy("p", [route(log, guarded={"jwt": []})], Metrics(), {"jwt": TableGuard("jwt")})
    sink = subscribe(p, "/events")
    assert sink.failed == (
        401,
        "no credentials for guard 'jwt': the http server's options.authorization"
        " does not say where to send them",
    )


def test_dynamic_filters_from_the_path_pick_messages(log: TopicLog) -> None:
    with_ = {"topic": "events", "filters": [{"key": "${params.user}"}]}
    p = proxy(route(log, "/users/{user}", with_))
    log.append("events", 0, b"fred", b"for fred")
    log.append("events", 0, b"wilma", b"for wilma")
    fred = subscribe(p, "/users/fred")
    wilma = subscribe(p, "/users/wilma")
    log.append("events", 1, b"fred", b"fred again")
    assert [e.data for e in fred.events()] == ["for fred", "fred again"]
    assert [e.data for e in wilma.events()] == ["for wilma"]


def test_filtered_gaps_send_an_id_only_block_after_enough_skips(
    log: TopicLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resume_points, "ID_ONLY_AFTER_SKIPPED", 5)
    with_ = {"topic": "events", "filters": [{"key": "mine"}]}
    p = proxy(route(log, "/{x}", with_))
    sink = subscribe(p, "/x")
    log.append("events", 0, b"mine", b"first")
    for _ in range(5):
        log.append("events", 0, b"other", b"skipped")
    parsed = sink.parsed()
    assert isinstance(parsed[0], SseEvent) and parsed[0].data == "first"
    assert parsed[1:] == [SseIdOnly(encode_progress({0: 6}))]
    assert p.stats.id_only == 1


def test_filtered_gaps_send_an_id_only_block_a_second_after_the_last_id(log: TopicLog) -> None:
    async def scenario() -> WireSink:
        with_ = {"topic": "events", "filters": [{"key": "mine"}]}
        sink = subscribe(proxy(route(log, "/{x}", with_)), "/x")
        log.append("events", 1, b"other", b"skipped")
        await asyncio.sleep(0.3)
        assert not sink.parsed()
        await asyncio.sleep(1.0)
        return sink

    sink = asyncio.run(scenario())
    assert sink.parsed() == [SseIdOnly(encode_progress({1: 1}))]


def test_an_offset_below_the_log_start_is_announced_with_a_reset_event(log: TopicLog) -> None:
    log.log_start[("events", 0)] = 10
    log.append("events", 0, None, b"ten")
    p = proxy(route(log))
    sink = subscribe(p, "/events", encode_progress({0: 3}))
    reset, message = sink.events()
    assert reset.type == "reset"
    assert json.loads(reset.data) == {"partition": 0, "requested": 3, "earliest": 10}
    assert reset.id == encode_progress({0: 10})
    assert (message.data, message.id) == ("ten", encode_progress({0: 11}))
    assert p.stats.resets == 1


def test_skipped_offsets_move_progress(log: TopicLog) -> None:
    sink = subscribe(proxy(route(log)), "/events")
    listener = log.subscriptions[0].listener
    listener.on_skipped(1, 4)
    listener.on_skipped(1, 4)  # the same offset again moves nothing
    log.append("events", 0, None, b"after")
    assert sink.events()[-1].id == encode_progress({0: 1, 1: 4})


def test_a_closed_sink_cancels_its_topic_subscription(log: TopicLog) -> None:
    p = proxy(route(log))
    sink = subscribe(p, "/events")
    sink.closed = True
    log.append("events", 0, None, b"x")
    assert not log.subscriptions
    assert p.stats.dropped == 1


def test_the_encoded_block_of_a_message_is_shared_by_every_subscriber(log: TopicLog) -> None:
    p = proxy(route(log))
    sinks = [subscribe(p, "/events") for _ in range(50)]
    log.append("events", 0, None, b"shared")
    assert p.encoded.misses == 1
    assert p.encoded.hits == 49
    assert all(s.events()[0].data == "shared" for s in sinks)


class CountingCheck:
    """An EventCheck that takes JSON objects only and keeps every call and refusal."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.refusals: list[tuple[str, dict[str, object]]] = []

    def __call__(self, data: str) -> str | None:
        self.calls.append(data)
        return None if data.startswith("{") else "not a JSON object"

    def refused(self, reason: str, **context: object) -> None:
        self.refusals.append((reason, context))


def test_a_sink_check_runs_once_per_message_for_all_its_streams(log: TopicLog) -> None:
    p = proxy(route(log))
    check = CountingCheck()
    checked = [WireSink() for _ in range(20)]
    for sink in checked:
        sink.check = check
        p.subscribe(request("/events"), None, sink)
    plain = subscribe(p, "/events")
    log.append("events", 0, None, b'{"ok":1}')
    log.append("events", 0, None, b"bad")
    assert check.calls == ['{"ok":1}', "bad"]
    assert check.refusals == [
        ("not a JSON object", {"topic": "events", "partition": 0, "offset": 1})
    ]
    for sink in checked:
        assert sink.wire == f'id:{encode_progress({0: 1})}\ndata:{{"ok":1}}\n\n'.encode() + (
            f"id:{encode_progress({0: 2})}\n\n".encode()
        )
    assert [e.data for e in plain.events()] == ['{"ok":1}', "bad"]  # no check, no drop


def test_the_encoded_cache_stays_bounded_keeping_the_newest() -> None:
    cache = EncodedMessages(capacity=3)
    messages = [KafkaMessage("t", 0, offset, None, b"v") for offset in range(10)]
    for message in messages:
        cache.get(message)
    assert len(cache._entries) == 3
    misses = cache.misses
    for message in messages[7:]:
        cache.get(message)
    assert cache.misses == misses  # the three newest are the ones kept


def test_encode_message_of_a_keyless_tombstone_is_an_empty_delete() -> None:
    assert encode_message(KafkaMessage("t", 0, 0, None, None)).block == b"event:delete\ndata:\n\n"


@pytest.mark.parametrize(
    ("kwargs", "path", "reason"),
    [
        ({"with_": {"topic": "${params.nope}"}}, "with", "does not capture it"),
        ({"with_": {"topic": "${guarded['jwt'].identity}"}}, "with", "not guarded by it"),
    ],
)
def test_route_config_errors_name_the_yaml_path(
    log: TopicLog, kwargs: dict[str, Any], path: str, reason: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        route(log, **kwargs)
    assert raised.value.path == f"bindings.p.routes[0].{path}"
    assert reason in str(raised.value)


def test_an_event_id_of_another_form_is_refused_by_the_schema() -> None:
    routes = [{"exit": "cache", "with": {"topic": "t", "event": {"id": "${key}"}}}]
    assert binding_errors("p", "sse-kafka", "proxy", routes=routes) == [
        "bindings.p.routes[0].with.event.id: '${key}' is not one of"
        """ ['${etag}', '["${base64(key)}","${etag}"]']"""
    ]


def test_a_route_without_with_reads_the_topic_from_the_path(log: TopicLog) -> None:
    config = Route(exit="cache", when=[{"path": "/{topic}"}], path="r")
    log.append("events", 0, None, b"x")
    sink = subscribe(proxy(compile_route(config, log, "r")), "/events")
    assert [e.data for e in sink.events()] == ["x"]
    with pytest.raises(ConfigError):
        compile_route(Route(exit="cache", when=[{"path": "/{name}"}], path="r"), log, "r")


def test_a_live_stream_passed_over_by_its_filter_writes_its_resume_point_on_keep_alives_only(
    log: TopicLog,
) -> None:
    async def scenario() -> tuple[WireSink, str | None, SseKafkaProxy]:
        with_ = {"topic": "events", "filters": [{"key": "k", "headers": {"zone": "north"}}]}
        p = proxy(route(log, "/{x}", with_))
        sink = subscribe(p, "/x")
        positions = LivePositions()
        log.subscriptions[0].listener.on_live(0, positions)
        for offset in range(3):  # offered by its key, dropped by its header, a batch at a time
            log.append("events", 0, b"k", b"south", headers=(("zone", b"south"),))
            positions.offsets[0] = offset + 1
            await asyncio.sleep(0.6)
        return sink, log.subscriptions[0].listener.resume_id(), p

    sink, resume, p = asyncio.run(scenario())
    assert sink.parsed() == []  # not one id-only block per batch, nor per second
    assert p.stats.id_only == 0
    assert resume == encode_progress({0: 3})  # the keep-alive carries it

"""``topics[].transforms``: which key and headers a record is given, and the configs refused."""

from __future__ import annotations

import pytest

from ssegate.bindings.kafka.transforms import Field, TopicTransform, Unextracted, build_transforms
from ssegate.catalogs import CatalogSet
from ssegate.config.errors import ConfigError
from ssegate.config.loader import load_config_text
from ssegate.kafka.topics import KafkaMessage

WHERE = "bindings.cache.options.topics"


def transform(entries: list[dict[str, object]], **topic: object) -> TopicTransform:
    built = build_transforms([{"name": "t", "transforms": entries, **topic}], WHERE, CatalogSet())
    return built["t"]


def record(
    value: bytes | None, key: bytes | None = b"producer-key", headers: tuple = ()
) -> KafkaMessage:
    return KafkaMessage("t", 0, 7, key, value, headers)


BOTH = [
    {"extract-key": "${message.value.id}"},
    {"extract-headers": {"x-type": "${message.value.type}", "x-n": "${message.value.n}"}},
]


def test_the_key_and_headers_come_from_the_value_s_fields() -> None:
    out, missed = transform(BOTH).apply(record(b'{"id": "a-1", "type": "tick", "n": 5}'))
    assert out.key == b"a-1"
    assert out.headers == (("x-type", b"tick"), ("x-n", b"5"))
    assert (out.topic, out.partition, out.offset, out.value) == (
        "t",
        0,
        7,
        b'{"id": "a-1", "type": "tick", "n": 5}',
    )
    assert missed == []


def test_an_extracted_header_replaces_the_producer_s_of_that_name_and_keeps_the_others() -> None:
    message = record(
        b'{"type": "tick"}', headers=(("x-type", b"forged"), ("trace", b"t1"), ("x-type", b"2"))
    )
    out, _ = transform([{"extract-headers": {"x-type": "${message.value.type}"}}]).apply(message)
    assert out.headers == (("trace", b"t1"), ("x-type", b"tick"))
    assert out.key == b"producer-key"  # no extract-key: the key stays


@pytest.mark.parametrize(
    "value",
    [
        b'{"type": "tick"}',
        b'{"id": null}',
        b'{"id": {"a": 1}}',
        b'{"id": [1]}',
        b"[1]",
        b"not json",
    ],
    ids=["missing", "null", "object", "array", "not-an-object", "not-json"],
)
def test_a_field_that_gives_nothing_leaves_no_key_and_no_header_and_says_so(value: bytes) -> None:
    out, missed = transform(BOTH).apply(record(value))
    assert out.key is None  # the producer's key must not stand for the config's
    assert ("x-type", b"tick") in out.headers or b"tick" not in value
    assert Unextracted(7, Field("value", "id")) in missed


def test_numbers_and_booleans_give_their_json_text() -> None:
    entries = [{"extract-headers": {"a": "${message.value.a}", "b": "${message.value.b}"}}]
    out, _ = transform(entries).apply(record(b'{"a": 1.5, "b": true}'))
    assert out.headers == (("a", b"1.5"), ("b", b"true"))


def test_a_tombstone_keeps_its_key_and_gets_no_value_headers() -> None:
    out, missed = transform(BOTH).apply(record(None))
    assert out.key == b"producer-key" and out.value is None
    assert out.headers == ()
    assert [m.field.name for m in missed] == ["type", "n"]


def test_fields_of_the_key_are_read_from_a_json_key() -> None:
    entries = [{"extract-key": "${message.key.id}"}]
    out, _ = transform(entries).apply(record(b"{}", key=b'{"id": "k9", "region": "eu"}'))
    assert out.key == b"k9"


def test_a_topic_with_a_value_model_is_read_through_its_view() -> None:
    out, _ = transform(BOTH, value={"model": "json"}).apply(record(b'{"id": "x", "type": "y"}'))
    assert (out.key, out.headers) == (b"x", (("x-type", b"y"),))


CONFIG = """\
name: transforms
bindings:
  cache:
    type: kafka
    kind: cache_server
    options:
      topics:
        - name: events
          transforms: {transforms}
    exit: client
  client:
    type: kafka
    kind: client
    options: {{servers: ["127.0.0.1:9092"]}}
    exit: tcp
  tcp:
    type: tcp
    kind: client
"""


def test_zilla_s_shape_of_transforms_validates() -> None:
    text = CONFIG.format(
        transforms='[{extract-key: "${message.value.id}"},'
        ' {extract-headers: {correlation-id: "${message.value.correlationId}"}}]'
    )
    config = load_config_text(text, env={})
    assert config.bindings["cache"].options["topics"][0]["transforms"][0] == {
        "extract-key": "${message.value.id}"
    }


@pytest.mark.parametrize(
    ("transforms", "where"),
    [
        ('[{extract-key: "${message.value.a.b}"}]', "transforms"),
        ('[{extract-key: "${message.headers.a}"}]', "transforms"),
        ('[{extract-headers: {"bad name": "${message.value.a}"}}]', "transforms"),
        ('[{extract-headers: {x: "${message.value.a}"}}, {extract-key: "${message.value.a}"}]',
         "transforms"),
        ('[{extract-key: "${message.value.a}", extract-headers: {x: "${message.value.a}"}}]',
         "transforms"),
    ],
    ids=["nested-field", "not-key-or-value", "header-name", "key-after-headers", "one-entry"],
)  # fmt: skip
def test_what_zilla_s_schema_refuses_is_refused_naming_the_path(
    transforms: str, where: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        load_config_text(CONFIG.format(transforms=transforms), env={})
    assert f"bindings.cache.options.topics[0].{where}" in str(refused.value)

"""The json, avro and string models: valid and invalid messages, the Avro wire format and its
JSON view, string limits, config errors with YAML paths, and models surviving pickle."""

from __future__ import annotations

import datetime
import io
import json
import pickle
from typing import Any

import fastavro
import pytest

from ssegate.catalogs import CatalogSet
from ssegate.catalogs.local import build_inline
from ssegate.config.errors import ConfigError
from ssegate.kafka.topics import KafkaMessage
from ssegate.models import build_model
from ssegate.models.schemas import frame, split_frame
from ssegate.models.topics import TopicModels

ORDER_JSON_SCHEMA = json.dumps(
    {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
        "required": ["id", "item"],
        "additionalProperties": False,
    }
)
ORDER_AVRO_SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "item", "type": "string"},
            {"name": "note", "type": ["null", "string"], "default": None},
            {"name": "raw", "type": "bytes"},
            {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        ],
    }
)
PRICE_AVRO_SCHEMA = json.dumps(
    {"type": "record", "name": "Price", "fields": [{"name": "cents", "type": "int"}]}
)


def catalogs() -> CatalogSet:
    subjects = {
        "orders-json": {"schema": ORDER_JSON_SCHEMA},
        "orders-value": {"schema": ORDER_AVRO_SCHEMA, "version": 1},
        "prices-value": {"schema": PRICE_AVRO_SCHEMA},
    }
    return CatalogSet({"local": build_inline("local", {"subjects": subjects}, "catalogs.local")})


def avro_bytes(schema_text: str, record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(json.loads(schema_text)), record)
    return out.getvalue()


ORDER = {"id": 7, "item": "tea", "note": None, "raw": b"\x00\xff", "day": datetime.date(2024, 5, 1)}
AVRO_SPEC = {"model": "avro", "view": "json", "catalog": {"local": [{"subject": "orders-value"}]}}


# -- json ---------------------------------------------------------------------------------------


def test_json_without_a_catalog_accepts_any_json_and_rejects_other_text() -> None:
    model = build_model("json", "m")
    assert model.validate(b'{"a": [1, 2]}') is None
    reason = model.validate(b"{not json")
    assert reason is not None and reason.startswith("not JSON")


def test_json_with_a_schema_accepts_a_matching_document() -> None:
    model = build_model(
        {"model": "json", "catalog": {"local": [{"subject": "orders-json"}]}}, "m", catalogs()
    )
    assert model.validate(b'{"id": 1, "item": "tea"}') is None
    assert model.to_text(b'{"id": 1, "item": "tea"}') == '{"id": 1, "item": "tea"}'


def test_json_with_a_schema_names_the_failing_location() -> None:
    model = build_model({"model": "json", "catalog": {"local": [{"id": 1}]}}, "m", catalogs())
    assert model.validate(b'{"id": "one", "item": "tea"}') == '/id: "one" is not of type "integer"'
    missing = model.validate(b'{"id": 1}')
    assert missing is not None and "item" in missing


def test_json_in_the_confluent_wire_format_is_checked_against_the_schema_its_id_names() -> None:
    model = build_model({"model": "json", "catalog": {"local": [{"id": 1}]}}, "m", catalogs())
    assert model.validate(frame(1, b'{"id": 1, "item": "tea"}')) is None
    assert model.to_text(frame(1, b'{"id": 1, "item": "tea"}')) == '{"id": 1, "item": "tea"}'
    assert (
        model.validate(frame(99, b"{}")) == "schema id 99: catalog 'local' has no schema with id 99"
    )


# -- avro ---------------------------------------------------------------------------------------


def test_the_confluent_wire_format_is_magic_byte_0_and_a_big_endian_schema_id() -> None:
    assert frame(258, b"x") == b"\x00\x00\x00\x01\x02x"
    assert split_frame(b"\x00\x00\x00\x01\x02x") == (258, b"x")
    assert split_frame(b"\x01\x00\x00\x00\x01") is None
    assert split_frame(b"\x00\x00") is None


def test_avro_accepts_a_framed_record_and_views_it_as_json() -> None:
    model = build_model(AVRO_SPEC, "m", catalogs())
    message = frame(2, avro_bytes(ORDER_AVRO_SCHEMA, ORDER))
    assert model.validate(message) is None
    assert json.loads(model.to_text(message)) == {
        "id": 7,
        "item": "tea",
        "note": None,
        "raw": "\u0000\u00ff",
        "day": "2024-05-01",
    }


def test_avro_reads_a_record_written_with_another_schema_id_of_the_catalog() -> None:
    model = build_model(AVRO_SPEC, "m", catalogs())
    message = frame(3, avro_bytes(PRICE_AVRO_SCHEMA, {"cents": 250}))
    assert model.validate(message) is None
    assert model.to_text(message) == '{"cents":250}'


def test_avro_rejects_unframed_truncated_and_overlong_messages() -> None:
    model = build_model(AVRO_SPEC, "m", catalogs())
    payload = avro_bytes(ORDER_AVRO_SCHEMA, ORDER)
    unframed = model.validate(payload)
    assert unframed is not None and "Confluent wire format" in unframed
    truncated = model.validate(frame(2, payload[:-3]))
    assert truncated is not None and truncated.startswith("not Avro of schema id 2")
    assert model.validate(frame(2, payload + b"\x00")) == (
        "1 bytes left over after an Avro record of schema id 2"
    )


def test_avro_with_an_unknown_schema_id_is_invalid_with_a_reason_naming_the_id() -> None:
    model = build_model(AVRO_SPEC, "m", catalogs())
    assert model.validate(frame(404, b"\x02")) == (
        "schema id 404: catalog 'local' has no schema with id 404"
    )


def test_avro_without_a_view_carries_the_message_as_base64() -> None:
    spec = {"model": "avro", "catalog": {"local": [{"id": 3}]}}
    model = build_model(spec, "m", catalogs())
    message = frame(3, avro_bytes(PRICE_AVRO_SCHEMA, {"cents": 1}))
    assert model.to_text(message) == "AAAAAAMC"


def test_avro_without_a_catalog_is_a_config_error_naming_the_model() -> None:
    with pytest.raises(ConfigError) as raised:
        build_model("avro", "bindings.b.options.topics[0].value")
    assert raised.value.path == "bindings.b.options.topics[0].value"


def test_a_subject_the_catalog_lacks_is_a_config_error_naming_the_catalog_entry() -> None:
    spec = {"model": "avro", "catalog": {"local": [{"subject": "nope"}]}}
    with pytest.raises(ConfigError) as raised:
        build_model(spec, "x.value", catalogs())
    assert raised.value.path == "x.value.catalog.local"
    assert "no subject 'nope'" in raised.value.message


def test_an_undefined_catalog_is_a_config_error() -> None:
    spec = {"model": "json", "catalog": {"elsewhere": [{"id": 1}]}}
    with pytest.raises(ConfigError, match="catalog 'elsewhere' is not defined"):
        build_model(spec, "x", catalogs())


# -- string -------------------------------------------------------------------------------------


def test_string_checks_encoding_lengths_and_a_whole_text_pattern() -> None:
    model = build_model(
        {"model": "string", "minLength": 2, "maxLength": 5, "pattern": "[a-z]+"}, "m"
    )
    assert model.validate(b"abc") is None
    assert model.validate(b"a") == "1 characters, fewer than minLength 2"
    assert model.validate(b"abcdef") == "6 characters, more than maxLength 5"
    assert model.validate(b"ab1") == "does not match pattern '[a-z]+'"
    bad = model.validate(b"\xff\xfe")
    assert bad is not None and bad.startswith("not utf-8 text")


def test_string_lengths_count_characters_not_bytes() -> None:
    model = build_model({"model": "string", "maxLength": 2}, "m")
    assert model.validate("éé".encode()) is None


def test_string_in_utf_16() -> None:
    model = build_model({"model": "string", "encoding": "utf_16"}, "m")
    assert model.validate("hé".encode("utf-16")) is None
    assert model.to_text("hé".encode("utf-16")) == "hé"


def test_string_with_a_bad_pattern_is_a_config_error_on_the_pattern() -> None:
    with pytest.raises(ConfigError) as raised:
        build_model({"model": "string", "pattern": "("}, "m")
    assert raised.value.path == "m.pattern"


# -- topics and pickling ------------------------------------------------------------------------


def test_a_topic_checks_key_and_value_and_lets_tombstones_through() -> None:
    topic = {"name": "orders", "key": {"model": "string", "pattern": "k[0-9]+"}, "value": "json"}
    models = TopicModels.build(topic, "bindings.c.options.topics[0]", catalogs())

    def message(key: bytes | None, value: bytes | None) -> KafkaMessage:
        return KafkaMessage("orders", 0, 5, key, value)

    assert models.validate(message(b"k1", b"{}")) is None
    assert models.validate(message(b"x", b"{}")) == "key: does not match pattern 'k[0-9]+'"
    reason = models.validate(message(b"k1", b"{"))
    assert reason is not None and reason.startswith("value: not JSON")
    assert models.validate(message(b"k1", None)) is None


def test_the_topic_strategy_names_the_subject_topic_dash_value() -> None:
    topic = {
        "name": "orders",
        "value": {"model": "avro", "view": "json", "catalog": {"local": [{"strategy": "topic"}]}},
    }
    models = TopicModels.build(topic, "t", catalogs())
    assert models.value is not None
    message = frame(2, avro_bytes(ORDER_AVRO_SCHEMA, ORDER))
    assert models.validate(KafkaMessage("orders", 0, 0, None, message)) is None
    assert json.loads(models.value_text(message))["item"] == "tea"


def test_models_survive_pickle_and_validate_the_same_after() -> None:
    json_model = build_model({"model": "json", "catalog": {"local": [{"id": 1}]}}, "m", catalogs())
    avro_model = build_model(AVRO_SPEC, "m", catalogs())
    string_model = build_model({"model": "string", "maxLength": 1}, "m")
    message = frame(2, avro_bytes(ORDER_AVRO_SCHEMA, ORDER))
    for model, good, bad in [
        (json_model, b'{"id": 1, "item": "x"}', b'{"id": 1}'),
        (avro_model, message, message[:-1]),
        (string_model, b"a", b"ab"),
    ]:
        copy = pickle.loads(pickle.dumps(model))
        assert copy.validate(good) is None
        assert copy.validate(bad) == model.validate(bad)


@pytest.mark.parametrize(
    ("block", "error"),
    [
        ({"model": "json", "pattern": "a+"}, "m.pattern: applies to string models, not to json"),
        (
            {"model": "string", "view": "json"},
            "m.view: applies to avro and protobuf models, not to string",
        ),
        (
            {"model": "avro", "encoding": "utf_8", "catalog": {"c": [{"id": 1}]}},
            "m.encoding: applies to string models, not to avro",
        ),
        (
            {"model": "json", "catalog": {"c": [{"subject": "s", "record": "Tick"}]}},
            "m.catalog.c[0].record: names a protobuf message; a json model has none",
        ),
    ],
)
def test_an_option_another_kind_of_model_reads_is_a_config_error(
    block: dict[str, Any], error: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        build_model(block, "m")
    assert str(raised.value) == error

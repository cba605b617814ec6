"""The payload and key schemas of a Kafka spec's channels become the cache server's topic models.

The expanded config is resolved as the gateway would, and the generated models are built from
it and fed messages: what they accept and refuse is what the cache server skips.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.asyncapi.test_expand import SSE_API

from ssegate.catalogs import build_catalogs
from ssegate.config.errors import ConfigError
from ssegate.config.loader import load_config_text
from ssegate.config.model import Config
from ssegate.models.topics import TopicModels

ORDER = {
    "type": "object",
    "properties": {"id": {"type": "integer"}},
    "required": ["id"],
    "additionalProperties": False,
}
KAFKA_API: dict[str, Any] = {
    "asyncapi": "3.0.0",
    "info": {"title": "orders", "version": "1.0.0"},
    "servers": {"broker": {"host": "localhost:9092", "protocol": "kafka"}},
    "channels": {
        "orders": {
            "address": "orders",
            "messages": {"order": {"$ref": "#/components/messages/order"}},
        },
        "by_region": {
            "address": "orders.{region}",
            "parameters": {"region": {}},
            "messages": {"order": {"$ref": "#/components/messages/order"}},
        },
    },
    "operations": {
        "onOrders": {"action": "receive", "channel": {"$ref": "#/channels/orders"}},
    },
    "components": {
        "messages": {
            "order": {
                "payload": {"$ref": "#/components/schemas/order"},
                "bindings": {"kafka": {"key": {"type": "string", "pattern": "^o-[0-9]+$"}}},
            }
        },
        "schemas": {"order": ORDER},
    },
}
CLIENT_CONFIG = """
name: asyncapi-kafka-topics
bindings:
  south:
    type: asyncapi
    kind: client
    options:
      specs:
        orders_api: kafka.yaml
"""
AVRO_ORDER = {
    "schemaFormat": "application/vnd.apache.avro;version=1.9.0",
    "schema": {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]},
}


def expand(tmp_path: Path, kafka: dict[str, Any], options: str = "") -> Config:
    (tmp_path / "kafka.yaml").write_text(yaml.safe_dump(kafka))
    return load_config_text(CLIENT_CONFIG + options, base_dir=str(tmp_path))


def topic_models(config: Config) -> dict[str, TopicModels]:
    """The models of the cache server's topics, built from the resolved config."""
    catalogs = build_catalogs(config, str)
    topics = config.bindings["south_kafka_cache_server"].options["topics"]
    return {t["name"]: TopicModels.build(t, f"topics[{i}]", catalogs) for i, t in enumerate(topics)}


def with_order(**changes: Any) -> dict[str, Any]:
    document = copy.deepcopy(KAFKA_API)
    document["components"]["messages"]["order"].update(changes)
    return document


def test_a_channel_payload_becomes_a_json_value_model_of_its_topic_on_the_cache_server(
    tmp_path: Path,
) -> None:
    config = expand(tmp_path, with_order(bindings={}))
    [entry] = config.bindings["south_kafka_cache_server"].options["topics"]
    assert entry == {
        "name": "orders",
        "value": {
            "model": "json",
            "catalog": {"south_catalog": [{"subject": "orders-value", "version": "latest"}]},
        },
    }
    subjects = config.catalogs["south_catalog"].options["subjects"]
    assert json.loads(subjects["orders-value"]["schema"]) == ORDER
    models = topic_models(config)["orders"]
    assert models.check(None, b'{"id": 7}') is None
    assert models.check(None, b'{"id": "seven"}') == 'value: /id: "seven" is not of type "integer"'
    assert models.check(None, b'{"id": 7, "note": 1}') is not None


def test_a_channel_whose_address_has_parameters_names_no_topic_and_is_left_open(
    tmp_path: Path,
) -> None:
    config = expand(tmp_path, KAFKA_API)
    topics = config.bindings["south_kafka_cache_server"].options["topics"]
    assert [t["name"] for t in topics] == ["orders"]


def test_a_string_key_schema_becomes_a_string_model_that_searches_its_pattern(
    tmp_path: Path,
) -> None:
    key = {"type": "string", "pattern": "o-[0-9]+", "maxLength": 8}
    models = topic_models(expand(tmp_path, with_order(bindings={"kafka": {"key": key}})))
    orders = models["orders"]
    assert orders.check(b"o-12", b'{"id": 1}') is None
    assert orders.check(b"xo-12", b'{"id": 1}') is None  # JSON Schema patterns are not anchored
    assert orders.check(b"p-12", b'{"id": 1}') is not None
    assert orders.check(b"o-1234567", b'{"id": 1}') == "key: 9 characters, more than maxLength 8"


def test_an_enum_key_accepts_only_its_values(tmp_path: Path) -> None:
    key = {"type": "string", "enum": ["eu", "us.east"]}
    models = topic_models(expand(tmp_path, with_order(bindings={"kafka": {"key": key}})))
    assert models["orders"].check(b"us.east", None) is None
    assert models["orders"].check(b"usxeast", None) is not None
    assert models["orders"].check(b"eu2", None) is not None


def test_an_object_key_schema_becomes_a_json_key_model(tmp_path: Path) -> None:
    key = {"type": "object", "required": ["tenant"]}
    config = expand(tmp_path, with_order(bindings={"kafka": {"key": key}}))
    [entry] = config.bindings["south_kafka_cache_server"].options["topics"]
    assert entry["key"]["catalog"] == {
        "south_catalog": [{"subject": "orders-key", "version": "latest"}]
    }
    models = topic_models(config)["orders"]
    assert models.check(b'{"tenant": "a"}', b'{"id": 1}') is None
    assert models.check(b"{}", b'{"id": 1}') == 'key: /: "tenant" is a required property'


def test_messages_with_several_payloads_accept_any_of_them(tmp_path: Path) -> None:
    document = with_order(bindings={})
    document["components"]["messages"]["refund"] = {
        "payload": {"type": "object", "required": ["refund"]}
    }
    document["channels"]["orders"]["messages"]["refund"] = {"$ref": "#/components/messages/refund"}
    models = topic_models(expand(tmp_path, document))["orders"]
    assert models.check(None, b'{"id": 1}') is None
    assert models.check(None, b'{"refund": 2}') is None
    assert models.check(None, b'{"other": 3}') is not None


def test_topics_the_config_lists_win_over_generated_ones_by_name(tmp_path: Path) -> None:
    options = """
      kafka:
        topics:
          - name: audit
            defaultOffset: live
          - name: orders
            defaultOffset: live
            value: string
"""
    config = expand(tmp_path, KAFKA_API, options)
    audit, orders = config.bindings["south_kafka_cache_server"].options["topics"]
    assert audit == {"name": "audit", "defaultOffset": "live"}
    assert orders["value"] == "string"
    assert orders["defaultOffset"] == "live"
    assert orders["key"]["model"] == "string"  # the document still models what is not listed


def test_an_avro_payload_on_a_kafka_channel_is_refused_at_its_pointer(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        expand(tmp_path, with_order(payload=AVRO_ORDER))
    message = str(raised.value)
    assert message.startswith(
        "bindings.south.options.specs.orders_api: /components/messages/order/payload/schema:"
        " an Avro schema is not turned into a model"
    ), message
    assert "options.kafka.topics" in message


def test_an_avro_payload_is_accepted_when_the_config_models_the_topic_value(
    tmp_path: Path,
) -> None:
    options = """
      kafka:
        topics:
          - name: orders
            value: string
"""
    config = expand(tmp_path, with_order(payload=AVRO_ORDER), options)
    [entry] = config.bindings["south_kafka_cache_server"].options["topics"]
    assert entry["value"] == "string"
    assert entry["key"]["model"] == "string"


def test_an_avro_key_is_refused_at_its_pointer(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        expand(tmp_path, with_order(bindings={"kafka": {"key": AVRO_ORDER}}))
    assert "/components/messages/order/bindings/kafka/key/schema: an Avro schema" in str(
        raised.value
    )


def test_a_2_6_key_written_as_an_avro_schema_is_refused_as_avro(tmp_path: Path) -> None:
    key = {"type": "record", "name": "Key", "fields": [{"name": "id", "type": "long"}]}
    v2 = {
        "asyncapi": "2.6.0",
        "info": {"title": "orders", "version": "1.0.0"},
        "servers": {"broker": {"url": "localhost:9092", "protocol": "kafka"}},
        "channels": {
            "orders": {
                "publish": {"message": {"payload": ORDER, "bindings": {"kafka": {"key": key}}}}
            }
        },
    }
    with pytest.raises(ConfigError) as raised:
        expand(tmp_path, v2)
    assert "/channels/orders/publish/message/bindings/kafka/key: an Avro schema" in str(
        raised.value
    )


def test_a_string_key_that_combines_subschemas_is_refused(tmp_path: Path) -> None:
    key = {"type": "string", "anyOf": [{"pattern": "a"}, {"pattern": "b"}]}
    with pytest.raises(ConfigError) as raised:
        expand(tmp_path, with_order(bindings={"kafka": {"key": key}}))
    assert "/components/messages/order/bindings/kafka/key/anyOf: a plain-text key" in str(
        raised.value
    )


def test_an_avro_payload_on_an_sse_channel_is_refused_at_its_pointer(tmp_path: Path) -> None:
    sse = copy.deepcopy(SSE_API)
    sse["channels"]["events"]["messages"]["tick"]["payload"] = AVRO_ORDER
    (tmp_path / "sse.yaml").write_text(yaml.safe_dump(sse))
    config = """
name: asyncapi-sse
bindings:
  north:
    type: asyncapi
    kind: server
    options:
      specs:
        sse_api: sse.yaml
    exit: sse_client0
"""
    with pytest.raises(ConfigError) as raised:
        load_config_text(config, base_dir=str(tmp_path))
    assert str(raised.value).startswith(
        "bindings.north.options.specs.sse_api: /channels/events/messages/tick/payload/schema:"
        " an Avro schema cannot check the events of an SSE channel"
    ), str(raised.value)


def test_a_2_6_kafka_document_models_its_topics_like_its_3_0_twin(tmp_path: Path) -> None:
    v2 = {
        "asyncapi": "2.6.0",
        "info": {"title": "orders", "version": "1.0.0"},
        "servers": {"broker": {"url": "localhost:9092", "protocol": "kafka"}},
        "channels": {
            "orders": {
                "publish": {
                    "operationId": "onOrders",
                    "message": {
                        "payload": ORDER,
                        "bindings": {"kafka": {"key": {"type": "string", "pattern": "^o-[0-9]+$"}}},
                    },
                }
            }
        },
    }
    from_v2 = expand(tmp_path, v2)
    from_v3 = expand(tmp_path, KAFKA_API)
    name = "south_kafka_cache_server"
    assert from_v2.bindings[name].options == from_v3.bindings[name].options
    assert from_v2.catalogs["south_catalog"].options == from_v3.catalogs["south_catalog"].options

"""AsyncAPI documents turned into bindings, and bad documents refused with the JSON pointer."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from ssegate.asyncapi.document import AsyncApiError, load_document
from ssegate.config.errors import ConfigError
from ssegate.config.loader import load_config_text
from ssegate.config.model import Config

SSE_API: dict[str, Any] = {
    "asyncapi": "3.0.0",
    "info": {"title": "events", "version": "1.0.0"},
    "servers": {"plain": {"host": "localhost:7114", "protocol": "http"}},
    "channels": {
        "events": {
            "address": "/events/{topic}",
            "parameters": {"topic": {}},
            "messages": {"tick": {"payload": {"type": "object", "required": ["n"]}}},
        }
    },
    "operations": {
        "onEvents": {"action": "send", "channel": {"$ref": "#/channels/events"}},
    },
}

KAFKA_API: dict[str, Any] = {
    "asyncapi": "3.0.0",
    "info": {"title": "topics", "version": "1.0.0"},
    "servers": {"broker": {"host": "localhost:9092", "protocol": "kafka"}},
    "channels": {"topic": {"address": "events.{topic}", "parameters": {"topic": {}}}},
    "operations": {
        "onEvents": {"action": "receive", "channel": {"$ref": "#/channels/topic"}},
    },
}

KAFKA_CONFIG = """
name: asyncapi-kafka
bindings:
  north:
    type: asyncapi
    kind: server
    options:
      specs:
        sse_api: sse.yaml
    exit: mapping
  mapping:
    type: asyncapi
    kind: proxy
    options:
      specs:
        sse_api: sse.yaml
        kafka_api: kafka.yaml
    routes:
      - when:
          - api-id: sse_api
        exit: south
        with:
          api-id: kafka_api
  south:
    type: asyncapi
    kind: client
    options:
      specs:
        kafka_api: kafka.yaml
"""


def load(tmp_path: Path, sse: dict[str, Any], kafka: dict[str, Any] = KAFKA_API) -> Config:
    (tmp_path / "sse.yaml").write_text(yaml.safe_dump(sse))
    (tmp_path / "kafka.yaml").write_text(yaml.safe_dump(kafka))
    return load_config_text(KAFKA_CONFIG, base_dir=str(tmp_path))


def refusal(tmp_path: Path, sse: dict[str, Any], kafka: dict[str, Any] = KAFKA_API) -> str:
    with pytest.raises(ConfigError) as raised:
        load(tmp_path, sse, kafka)
    return str(raised.value)


def test_an_sse_channel_mapped_to_a_kafka_channel_becomes_an_sse_kafka_route(
    tmp_path: Path,
) -> None:
    config = load(tmp_path, SSE_API)
    [route] = config.bindings["mapping_sse_kafka"].routes
    assert route.when == [{"path": "/events/{topic}"}]
    assert route.with_ == {"topic": "events.${params.topic}"}
    assert route.exit == "south_kafka_cache_client"
    assert config.bindings["south_kafka_client"].options["servers"] == ["localhost:9092"]
    http = config.bindings["north_http_server"]
    assert [r.when for r in http.routes] == [[{"headers": {":path": "/events/{topic}"}}]]
    sse = config.bindings["north_sse_server"]
    assert [(r.when, r.exit) for r in sse.routes] == [
        ([{"path": "/events/*"}], "mapping_sse_kafka")
    ]
    [request] = sse.options["requests"]
    assert request["content"]["model"] == "json"
    tcp = config.bindings["north_tcp_server"]
    assert tcp.options == {"host": "localhost", "port": 7114}
    assert tcp.exit == "north_http_server"


def test_a_spec_read_from_a_catalog_is_narrowed_to_the_servers_its_entry_names(
    tmp_path: Path,
) -> None:
    sse = copy.deepcopy(SSE_API)
    sse["servers"]["other"] = {"host": "localhost:7115", "protocol": "http", "pathname": "/v2"}
    (tmp_path / "kafka.yaml").write_text(yaml.safe_dump(KAFKA_API))
    (tmp_path / "sse.yaml").write_text(yaml.safe_dump(sse))  # the proxy's copy
    catalog = {"events": {"schema": json.dumps(sse), "version": 3}}
    entry = {"catalog": {"specs": {"subject": "events", "version": 3}}, "servers": []}
    document = yaml.safe_load(KAFKA_CONFIG)
    document["catalogs"] = {"specs": {"type": "inline", "options": {"subjects": catalog}}}
    picks = {
        "by name": [{"name": "plain"}],
        "by host and pathname": [{"host": "localhost:7114", "pathname": "/"}],
        "by url": [{"url": "localhost:7114"}],
    }
    for servers in picks.values():
        entry["servers"] = servers
        document["bindings"]["north"]["options"]["specs"]["sse_api"] = entry
        config = load_config_text(yaml.safe_dump(document), base_dir=str(tmp_path))
        assert config.bindings["north_tcp_server"].options["port"] == 7114
    entry["servers"] = [{"name": "nowhere"}]
    with pytest.raises(ConfigError) as raised:
        load_config_text(yaml.safe_dump(document), base_dir=str(tmp_path))
    assert str(raised.value) == (
        "bindings.north.options.specs.sse_api.servers: selects none of the document's servers"
    )


def test_a_2_6_document_expands_like_its_3_0_twin(tmp_path: Path) -> None:
    v2 = {
        "asyncapi": "2.6.0",
        "info": {"title": "events", "version": "1.0.0"},
        "servers": {"plain": {"url": "localhost:7114", "protocol": "http"}},
        "channels": {
            "/events/{topic}": {
                "parameters": {"topic": {"schema": {"type": "string"}}},
                "subscribe": {
                    "operationId": "onEvents",
                    "message": {"payload": {"type": "object", "required": ["n"]}},
                },
            }
        },
    }
    from_v2 = load(tmp_path, v2)
    from_v3 = load(tmp_path, SSE_API)
    for name in ("mapping_sse_kafka", "north_sse_server", "north_http_server"):
        assert from_v2.bindings[name].routes == from_v3.bindings[name].routes


def test_a_bearer_scheme_guards_the_route_with_the_config_jwt_guard(tmp_path: Path) -> None:
    sse = copy.deepcopy(SSE_API)
    sse["components"] = {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}}
    sse["operations"]["onEvents"]["security"] = [{"$ref": "#/components/securitySchemes/bearer"}]
    (tmp_path / "sse.yaml").write_text(yaml.safe_dump(sse))
    (tmp_path / "kafka.yaml").write_text(yaml.safe_dump(KAFKA_API))
    guard = "guards:\n  jwt0:\n    type: jwt\n    options:\n      issuer: https://i\n"
    config = load_config_text(guard + KAFKA_CONFIG, base_dir=str(tmp_path))
    [route] = config.bindings["north_sse_server"].routes
    assert route.guarded == {"jwt0": []}
    authorization = config.bindings["north_http_server"].options["authorization"]
    assert authorization == {
        "jwt0": {"credentials": {"headers": {"authorization": "Bearer {credentials}"}}}
    }


def mutated(document: dict[str, Any], path: list[str], value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(document)
    target = changed
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return changed


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (
            ["channels", "events", "address"],
            "events/{topic}",
            "/channels/events/address: 'events/{topic}' is not a path",
        ),
        (
            ["channels", "events", "address"],
            "/events/{name}",
            "/channels/events/parameters/topic: parameter 'topic' does not appear in the address",
        ),
        (
            ["channels", "events", "address"],
            7,
            "/channels/events/address: 7 is not of type 'string', 'null'",
        ),
        (
            ["servers", "plain", "protocol"],
            "mqtt",
            "/servers/plain/protocol: 'mqtt' is not an SSE server protocol",
        ),
        (
            ["operations", "onEvents", "channel"],
            {"$ref": "#/channels/missing"},
            "/operations/onEvents/channel/$ref: '#/channels/missing' points at nothing",
        ),
        (["info"], {"title": "no version"}, "/info: 'version' is a required property"),
    ],
)
def test_an_invalid_document_is_refused_with_the_json_pointer(
    tmp_path: Path, path: list[str], value: Any, expected: str
) -> None:
    message = refusal(tmp_path, mutated(SSE_API, path, value))
    assert message.startswith(f"bindings.north.options.specs.sse_api: {expected}"), message


def test_a_kafka_operation_that_sends_is_refused_with_its_pointer(tmp_path: Path) -> None:
    kafka = mutated(KAFKA_API, ["operations", "onEvents", "action"], "send")
    message = refusal(tmp_path, SSE_API, kafka)
    assert message.startswith(
        "bindings.mapping.options.specs.kafka_api: /operations/onEvents/action: the gateway"
    ), message


def test_an_unknown_version_is_refused_at_its_pointer() -> None:
    with pytest.raises(AsyncApiError) as raised:
        load_document("asyncapi: 2.0.0\ninfo: {title: t, version: '1'}\nchannels: {}\n")
    assert str(raised.value) == "/asyncapi: version '2.0.0' is not supported (3.0.0 or 2.6.0)"


def test_a_missing_spec_file_names_the_spec_entry(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config_text(KAFKA_CONFIG, base_dir=str(tmp_path))
    assert str(raised.value) == (
        f"bindings.north.options.specs.sse_api: {tmp_path / 'sse.yaml'}:"
        " cannot read the AsyncAPI document: No such file or directory"
    )


def test_an_asyncapi_server_without_specs_serves_the_export_of_a_hand_written_config() -> None:
    from ssegate.engine.runtime import Runtime

    config = load_config_text(
        """
name: hand-written
bindings:
  tcp0:
    type: tcp
    kind: server
    options: {host: 127.0.0.1, port: 7114}
    exit: http0
  http0:
    type: http
    kind: server
    routes:
      - when: [{headers: {":path": /asyncapi.json}}]
        exit: api_document
      - when: [{headers: {":path": /events}}]
        exit: sse0
  api_document:
    type: asyncapi
    kind: server
    options: {specs: {}}
  sse0:
    type: sse
    kind: server
    exit: sse_client0
  sse_client0:
    type: sse
    kind: client
    exit: http_client0
  http_client0:
    type: http
    kind: client
    exit: tcp_client0
  tcp_client0:
    type: tcp
    kind: client
    options: {host: 127.0.0.1, port: 8001}
"""
    )
    handler = Runtime(config).build_binding("api_document")
    document = yaml.safe_load(handler.body)
    assert [c["address"] for c in document["channels"].values()] == ["/events"]
    assert load_document(handler.body.decode())["servers"]["http_7114"]["host"] == "127.0.0.1:7114"

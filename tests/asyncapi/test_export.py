"""Exports of the example configs are valid AsyncAPI 3.0.0 and say what the configs serve."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft7Validator
from tests.asyncapi.official import npm_schema

from ssegate.asyncapi.document import official_schema
from ssegate.asyncapi.export import export_document
from ssegate.config.loader import load_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ENV = {
    "SSEGATE_KEYSTORE": "unused.p12",
    "KEYSTORE_PASSWORD": "unused",
    "SSEGATE_HOST": "0.0.0.0",
    "SSEGATE_HTTP_PORT": "7114",
    "SSEGATE_HTTPS_PORT": "7143",
    "SSEGATE_WWW": "www",
    "KAFKA_BOOTSTRAP": "localhost:9092",
    "SSEGATE_JWT_RSA_N": "AQAB",
    "SSEGATE_JWT_EC_X": "AQAB",
    "SSEGATE_JWT_EC_Y": "AQAB",
    "SSE_SERVER_HOST": "127.0.0.1",
    "SSE_SERVER_PORT": "8001",
}


def exported(example: str) -> dict[str, Any]:
    return export_document(load_config(EXAMPLES / example / "zilla.yaml", env=ENV))


def official_errors(document: dict[str, Any]) -> list[str]:
    validator = Draft7Validator(npm_schema("3.0.0"))
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(document)]


def test_the_shipped_schemas_are_the_official_ones_unchanged() -> None:
    for version in ("3.0.0", "2.6.0"):
        shipped = dict(official_schema(version))
        assert "@asyncapi/specs" in shipped.pop("$comment")
        assert shipped == npm_schema(version)


@pytest.mark.parametrize("example", ["sse.kafka", "sse.proxy"])
def test_an_example_config_exports_a_valid_asyncapi_3_document(example: str) -> None:
    assert official_errors(exported(example)) == []


def test_the_sse_kafka_export_has_a_channel_per_route_with_its_parameters() -> None:
    document = exported("sse.kafka")
    assert {s["host"]: s["protocol"] for s in document["servers"].values()} == {
        "0.0.0.0:7143": "https",
        "0.0.0.0:7114": "http",
    }
    channels = {
        c["address"]: sorted(c.get("parameters", {})) for c in document["channels"].values()
    }
    assert channels == {
        "/{topic}/key/{key}/zone/{zone}": ["key", "topic", "zone"],
        "/{topic}/key/{key}": ["key", "topic"],
        "/{topic}/zone/{zone}": ["topic", "zone"],
        "/vip/{topic}": ["topic"],
        "/keyed/{topic}": ["topic"],
        "/{topic}": ["topic"],
    }
    assert {o["action"] for o in document["operations"].values()} == {"send"}
    assert "components" not in document


def test_a_guarded_route_exports_a_bearer_scheme_and_its_roles() -> None:
    document = exported("sse.proxy")
    [operation] = document["operations"].values()
    assert operation["security"] == [{"$ref": "#/components/securitySchemes/authn_jwt"}]
    assert operation["x-ssegate-roles"] == ["proxy:stream"]
    scheme = document["components"]["securitySchemes"]["authn_jwt"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    [channel] = document["channels"].values()
    assert channel["address"] == "/events"


def test_the_cli_writes_the_export_to_a_file(tmp_path: Path) -> None:
    out = tmp_path / "api.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ssegate",
            "asyncapi",
            "export",
            "-c",
            str(EXAMPLES / "sse.proxy" / "zilla.yaml"),
            "-o",
            str(out),
        ],
        env={**ENV, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert official_errors(json.loads(out.read_text())) == []

"""The registry catalogs against a real Apicurio Registry (built from Maven Central by ``./run``'s
setup step ``registry``; in-memory storage): its own API for ``apicurio`` and its
Confluent-compatible API for ``schema-registry``. Schemas are registered over HTTP, resolved by
subject/version and by id, used by a model to validate Confluent-framed Avro, and keep working
after the registry is killed."""

from __future__ import annotations

import io
import json
import urllib.request
from collections.abc import Iterator

import fastavro
import pytest

from ssegate.catalogs import CatalogSet, CatalogUnavailable, SchemaRef, UnknownSchema
from ssegate.catalogs.registry import ApicurioCatalog, ConfluentCatalog
from ssegate.engine.runtime import free_port
from ssegate.models import build_model
from ssegate.models.schemas import frame
from ssegate_lab.registry import ApicurioServer
from ssegate_lab.testing.tools import prepared

pytestmark = pytest.mark.integration

PRICE: dict[str, object] = {
    "type": "record",
    "name": "Price",
    "fields": [{"name": "cents", "type": "int"}],
}
ORDER: dict[str, object] = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}],
}


def post(url: str, body: bytes, headers: dict[str, str]) -> dict[str, object]:
    request = urllib.request.Request(url, body, headers, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        answer: dict[str, object] = json.loads(response.read())
        return answer


def avro(schema: dict[str, object], record: dict[str, object]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApicurioServer]:
    server = ApicurioServer(
        prepared("registry"), free_port(), tmp_path_factory.mktemp("registry") / "registry.log"
    )
    server.start()
    yield server
    server.stop()


def register_confluent(registry: ApicurioServer, subject: str, schema: dict[str, object]) -> int:
    answer = post(
        f"{registry.url}/apis/ccompat/v7/subjects/{subject}/versions",
        json.dumps({"schema": json.dumps(schema)}).encode(),
        {"content-type": "application/vnd.schemaregistry.v1+json"},
    )
    return int(str(answer["id"]))


def register_apicurio(registry: ApicurioServer, group: str, artifact: str, schema: object) -> int:
    answer = post(
        f"{registry.url}/apis/registry/v2/groups/{group}/artifacts",
        json.dumps(schema).encode(),
        {
            "content-type": "application/json",
            "X-Registry-ArtifactId": artifact,
            "X-Registry-ArtifactType": "AVRO",
        },
    )
    return int(str(answer["globalId"]))


def test_registry_catalogs_resolve_validate_and_survive_the_registry_going_away(
    registry: ApicurioServer,
) -> None:
    price_id = register_confluent(registry, "prices-value", PRICE)
    order_id = register_apicurio(registry, "shop", "orders", ORDER)

    confluent = ConfluentCatalog("sr", f"{registry.url}/apis/ccompat/v7")
    apicurio = ApicurioCatalog("ap", registry.url, group_id="shop")
    catalogs = CatalogSet({"sr": confluent, "ap": apicurio})

    latest = catalogs.resolve("sr", SchemaRef(subject="prices-value"))
    assert (latest.id, latest.version, json.loads(latest.text)) == (price_id, 1, PRICE)
    assert catalogs.resolve("sr", SchemaRef(id=price_id)).text == latest.text
    by_subject = catalogs.resolve("ap", SchemaRef(subject="orders", version="1"))
    assert (by_subject.id, by_subject.type, json.loads(by_subject.text)) == (
        order_id,
        "AVRO",
        ORDER,
    )
    with pytest.raises(UnknownSchema):
        catalogs.resolve("sr", SchemaRef(subject="no-such-subject"))

    price_model = build_model(
        {"model": "avro", "view": "json", "catalog": {"sr": [{"strategy": "topic"}]}},
        "topics[0].value",
        catalogs,
        topic="prices",
    )
    order_model = build_model(
        {"model": "avro", "view": "json", "catalog": {"ap": [{"subject": "orders"}]}},
        "topics[1].value",
        catalogs,
    )
    price = frame(price_id, avro(PRICE, {"cents": 250}))
    order = frame(order_id, avro(ORDER, {"id": 1, "item": "tea"}))
    assert price_model.validate(price) is None
    assert order_model.validate(order) is None
    unknown = price_model.validate(frame(9999, b"\x02"))
    assert unknown is not None and unknown.startswith("schema id 9999: catalog 'sr' has no schema")

    registry.stop()

    assert price_model.validate(price) is None
    assert price_model.to_text(price) == '{"cents":250}'
    assert order_model.to_text(order) == '{"id":1,"item":"tea"}'
    assert catalogs.resolve("ap", SchemaRef(id=order_id)).text == by_subject.text
    gone = price_model.validate(frame(12345, b"\x02"))
    assert gone is not None and "cannot reach" in gone
    with pytest.raises(CatalogUnavailable):
        catalogs.resolve("sr", SchemaRef(subject="prices-value", version="7"))

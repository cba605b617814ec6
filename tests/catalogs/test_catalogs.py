"""Catalogs: inline and filesystem subjects, the cache rules, and the registry clients' requests.

The registry clients are checked here against a small in-test HTTP server that answers like
the Confluent and Apicurio APIs (request paths, caching, error mapping); the real registry is in
``tests/test_registry.py``.
"""

from __future__ import annotations

import json
import pickle
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ssegate.catalogs import (
    CatalogSet,
    CatalogUnavailable,
    Schema,
    SchemaRef,
    UnknownSchema,
    build_catalog,
    build_catalogs,
)
from ssegate.catalogs.cache import SchemaCache
from ssegate.catalogs.registry import ApicurioCatalog, ConfluentCatalog
from ssegate.config.errors import ConfigError
from ssegate.config.model import Component, Config

# -- inline and filesystem ----------------------------------------------------------------------


def test_inline_subjects_resolve_by_subject_version_and_id() -> None:
    component = Component(
        "local",
        "inline",
        {"subjects": {"a": {"schema": '{"type": "string"}', "version": 3}, "b": {"schema": "{}"}}},
    )
    catalog = build_catalog(component, str)
    assert catalog.resolve(SchemaRef(subject="a")).text == '{"type": "string"}'
    assert catalog.resolve(SchemaRef(subject="a", version="3")).version == 3
    assert catalog.resolve(SchemaRef(id=2)).subject == "b"
    with pytest.raises(UnknownSchema, match="at version 3, not 4"):
        catalog.resolve(SchemaRef(subject="a", version="4"))


def test_filesystem_subjects_are_read_relative_to_the_config(tmp_path: Path) -> None:
    (tmp_path / "order.avsc").write_text('{"type": "long"}')
    component = Component("files", "filesystem", {"subjects": {"order": {"path": "order.avsc"}}})
    catalog = build_catalog(component, lambda p: str(tmp_path / p))
    schema = catalog.resolve(SchemaRef(subject="order"))
    assert (schema.id, schema.text, schema.type) == (1, '{"type": "long"}', "AVRO")


def test_a_missing_filesystem_schema_is_a_config_error_naming_its_path(tmp_path: Path) -> None:
    component = Component(
        "files", "filesystem", {"subjects": {"order": {"path": "gone.avsc"}}}, "catalogs.files"
    )
    with pytest.raises(ConfigError) as raised:
        build_catalog(component, lambda p: str(tmp_path / p))
    assert raised.value.path == "catalogs.files.options.subjects.order.path"


def test_build_catalogs_builds_every_catalog_of_the_config() -> None:
    config = Config(
        "c",
        {},
        catalogs={
            "local": Component("local", "inline", {"subjects": {}}),
            "registry": Component("registry", "karapace", {"url": "http://127.0.0.1:1"}),
        },
    )
    built = build_catalogs(config, str)
    assert "local" in built and "registry" in built
    with pytest.raises(UnknownSchema, match="catalog 'other' is not defined"):
        built.resolve("other", SchemaRef(id=1))


# -- the cache rules ----------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_latest_is_asked_again_after_max_age_and_numbered_versions_never() -> None:
    clock = Clock()
    cache = SchemaCache(max_age=10, clock=clock)
    asked: list[str] = []

    def fetch(version: int) -> Schema:
        asked.append(str(version))
        return Schema(version, "{}", subject="s", version=version)

    assert cache.by_version("s", "latest", lambda: fetch(1)).id == 1
    assert cache.by_version("s", "1", lambda: fetch(1)).id == 1
    clock.now = 5
    assert cache.by_version("s", "latest", lambda: fetch(2)).id == 1
    clock.now = 11
    assert cache.by_version("s", "latest", lambda: fetch(2)).id == 2
    assert cache.by_version("s", "1", lambda: fetch(9)).id == 1
    assert asked == ["1", "1", "2"]


def test_a_stale_latest_keeps_working_while_the_registry_is_unavailable() -> None:
    clock = Clock()
    cache = SchemaCache(max_age=10, clock=clock)
    cache.by_version("s", "latest", lambda: Schema(1, "{}"))
    clock.now = 20

    def down() -> Schema:
        raise CatalogUnavailable("registry down")

    assert cache.by_version("s", "latest", down).id == 1


def test_unknown_ids_and_an_unavailable_registry_are_not_asked_again_at_once() -> None:
    clock = Clock()
    cache = SchemaCache(max_age=10, retry_after=5, clock=clock)
    calls: list[str] = []

    def unknown() -> Schema:
        calls.append("unknown")
        raise UnknownSchema("no such id")

    def down() -> Schema:
        calls.append("down")
        raise CatalogUnavailable("refused")

    for _ in range(3):
        with pytest.raises(UnknownSchema):
            cache.by_id(9, unknown)
    for _ in range(3):
        with pytest.raises(CatalogUnavailable, match="refused"):
            cache.by_id(10, down)
    assert calls == ["unknown", "down"]
    clock.now = 6
    assert cache.by_id(10, lambda: Schema(10, "{}")).id == 10
    clock.now = 11
    assert cache.by_id(9, lambda: Schema(9, "{}")).id == 9


# -- registry clients against an in-test HTTP server --------------------------------------------


class FakeRegistry(BaseHTTPRequestHandler):
    answers: dict[str, tuple[int, bytes]] = {}
    asked: list[str] = []

    def do_GET(self) -> None:
        self.asked.append(self.path)
        status, body = self.answers.get(self.path, (404, b'{"error_code": 40403}'))
        self.send_response(status)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def registry() -> Iterator[str]:
    FakeRegistry.answers = {}
    FakeRegistry.asked = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeRegistry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_confluent_catalog_asks_by_subject_version_and_by_id_once_each(registry: str) -> None:
    FakeRegistry.answers = {
        "/subjects/orders-value/versions/latest": (
            200,
            json.dumps(
                {"subject": "orders-value", "version": 2, "id": 21, "schema": "{}"}
            ).encode(),
        ),
        "/schemas/ids/22": (200, json.dumps({"schema": "{}", "schemaType": "JSON"}).encode()),
    }
    catalog = ConfluentCatalog("sr", registry + "/")
    for _ in range(2):
        latest = catalog.resolve(SchemaRef(subject="orders-value"))
        by_id = catalog.by_id(22)
    assert (latest.id, latest.version, latest.type) == (21, 2, "AVRO")
    assert (by_id.id, by_id.type) == (22, "JSON")
    assert catalog.by_id(21) is latest
    assert FakeRegistry.asked == ["/subjects/orders-value/versions/latest", "/schemas/ids/22"]


def test_confluent_context_qualifies_subjects_and_id_lookups(registry: str) -> None:
    catalog = ConfluentCatalog("sr", registry, context="staging")
    with pytest.raises(UnknownSchema, match="has no subject 'orders' version 1"):
        catalog.resolve(SchemaRef(subject="orders", version="1"))
    with pytest.raises(UnknownSchema):
        catalog.by_id(5)
    assert FakeRegistry.asked == [
        "/subjects/%3A.staging%3Aorders/versions/1",
        "/schemas/ids/5?subject=%3A.staging%3A",
    ]


def test_a_registry_5xx_or_refused_connection_is_unavailable_not_unknown(registry: str) -> None:
    FakeRegistry.answers = {"/schemas/ids/1": (503, b"busy")}
    with pytest.raises(CatalogUnavailable, match="answered 503"):
        ConfluentCatalog("sr", registry).by_id(1)
    with pytest.raises(CatalogUnavailable, match="cannot reach"):
        ConfluentCatalog("sr", "http://127.0.0.1:1").by_id(1)


def test_apicurio_catalog_reads_meta_then_content_by_global_or_content_id(registry: str) -> None:
    api = "/apis/registry/v2"
    FakeRegistry.answers = {
        f"{api}/groups/shop/artifacts/orders/meta": (
            200,
            json.dumps({"globalId": 40, "contentId": 4, "version": "3", "type": "AVRO"}).encode(),
        ),
        f"{api}/ids/globalIds/40": (200, b'{"type": "long"}'),
        f"{api}/ids/contentIds/4": (200, b'{"type": "long"}'),
    }
    by_global = ApicurioCatalog("ap", registry, group_id="shop")
    schema = by_global.resolve(SchemaRef(subject="orders"))
    assert (schema.id, schema.version, schema.text) == (40, 3, '{"type": "long"}')
    by_content = ApicurioCatalog("ap", registry, group_id="shop", use_id="contentId")
    assert by_content.resolve(SchemaRef(subject="orders")).id == 4
    assert f"{api}/ids/contentIds/4" in FakeRegistry.asked


def test_a_catalog_set_pickles_with_what_it_has_cached(registry: str) -> None:
    FakeRegistry.answers = {"/schemas/ids/3": (200, b'{"schema": "{}"}')}
    catalogs = CatalogSet({"sr": ConfluentCatalog("sr", registry)})
    catalogs.prefetch_sync([("sr", SchemaRef(id=3))])
    copy = pickle.loads(pickle.dumps(catalogs))
    FakeRegistry.answers = {}
    assert copy.by_id("sr", 3).text == "{}"

"""The validation step without Spark: reasons for invalid values, JSON text for valid ones."""

from __future__ import annotations

import json

import pytest

from ssegate.catalogs import CatalogSet
from ssegate.catalogs.local import build_inline
from ssegate.config.errors import ConfigError
from ssegate.pipeline.validation import build_record_model, check_values

SCHEMA = {"type": "object", "required": ["device"], "properties": {"t": {"type": "number"}}}
CATALOGS = CatalogSet(
    {"local": build_inline("local", {"subjects": {"r": {"schema": json.dumps(SCHEMA)}}}, "c")}
)
SPEC = {"model": "json", "catalog": {"local": [{"subject": "r"}]}}


def test_each_value_gets_a_reason_or_its_text() -> None:
    model = build_record_model(SPEC, "sources.s.model", CATALOGS)
    reasons, texts = check_values(
        model, [b'{"device": "a", "t": 1}', b'{"device": "a", "t": "x"}', b"{", None, b"{}"]
    )
    assert texts[0] == '{"device": "a", "t": 1}'
    assert reasons[0] is None
    assert reasons[1] is not None and reasons[1].startswith("/t:")
    assert reasons[2] is not None and reasons[2].startswith("not JSON")
    assert reasons[3] == "no value (tombstone)"
    assert reasons[4] is not None and "device" in reasons[4]
    assert texts[1:] == [None, None, None, None]


def test_without_a_model_any_json_object_is_valid() -> None:
    reasons, _ = check_values(build_record_model(None, "m", CATALOGS), [b"{}", b"[1]", b"x"])
    assert reasons[0] is None
    assert reasons[1] == "not a JSON object"
    assert reasons[2] is not None


def test_a_subject_the_catalog_lacks_is_a_config_error_at_the_model_path() -> None:
    spec = {"model": "json", "catalog": {"local": [{"subject": "missing"}]}}
    with pytest.raises(ConfigError) as caught:
        build_record_model(spec, "sources.s.model", CATALOGS)
    assert caught.value.path == "sources.s.model.catalog.local"

"""Which JSON Schemas the JVM checks, without Spark: the plan, its refusals, regex translation."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from ssegate.pipeline.json_checks import PYTHON_ONLY, NotInJvm, java_pattern, plan_checks


def plan(schema: dict[str, Any]) -> Any:
    return plan_checks(json.dumps(schema))


def test_a_flat_schema_becomes_one_check_per_property() -> None:
    checks = plan({
        "type": "object",
        "required": ["device"],
        "properties": {
            "device": {"type": "string", "maxLength": 9, "pattern": "^d[0-9]+$"},
            "temperature": {"type": ["number", "null"], "minimum": -40},
            "room": {"type": "object", "properties": {"name": {"enum": ["lab"]}}},
        },
        "additionalProperties": False,
    })  # fmt: skip
    device, temperature, room = checks.properties
    assert (device.pointer, device.required, device.value.kind) == ("/device", True, "string")
    assert device.value.max_length == 9
    assert device.value.java_pattern == "^d[0-9]+\\z"
    assert (temperature.value.nullable, temperature.value.minimum) == (True, -40.0)
    assert room.value.object is not None
    (name,) = room.value.object.properties
    assert (name.pointer, name.value.kind, name.value.enum) == ("/room/name", "string", ("lab",))
    assert checks.closed


@pytest.mark.parametrize("keyword", PYTHON_ONLY)
def test_every_python_only_keyword_is_refused_by_name(keyword: str) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", keyword: {}}}}
    with pytest.raises(NotInJvm) as refused:
        plan(schema)
    assert refused.value.keyword == keyword
    assert refused.value.pointer == "/a"


@pytest.mark.parametrize(
    ("schema", "keyword"),
    [
        ({"type": "array"}, "type"),
        ({"properties": {"a": {}}}, "type"),
        ({"type": "object", "properties": {"a": {"minLength": 1}}}, "minLength"),
        ({"type": "object", "properties": {"a": {"type": "number", "maxLength": 1}}}, "maxLength"),
        ({"type": "object", "properties": {"a": {"type": ["string", "number"]}}}, "type"),
        ({"type": "object", "properties": {"a": {"enum": ["x", 1]}}}, "enum"),
        ({"type": "object", "properties": {"a": {"type": "string", "pattern": "\\d+"}}}, "pattern"),
        ({"type": "object", "properties": {"a": {"type": "array", "items": [{}]}}}, "items"),
        ({"type": "object", "properties": {"a": {"type": "object", "additionalProperties": False}}},
         "additionalProperties"),
        ({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
          "properties": {"a": {"type": "string", "format": "date-time"}}}, "format"),
        ({"type": "object", "properties": {"A": {}, "a": {}}}, "properties"),
    ],
)  # fmt: skip
def test_what_spark_would_read_differently_is_refused(schema: dict[str, Any], keyword: str) -> None:
    with pytest.raises(NotInJvm) as refused:
        plan(schema)
    assert refused.value.keyword == keyword


def test_format_is_an_annotation_from_draft_2019_09_on() -> None:
    checks = plan({"type": "object", "properties": {"ts": {"type": "string", "format": "date"}}})
    assert checks.properties[0].value.kind == "string"


@pytest.mark.parametrize(
    ("pattern", "java"),
    [
        ("^abc$", "^abc\\z"),
        ("^a.c", "^a[^\\n\\r\\u2028\\u2029]c"),
        ("[a-z0-9_]{2,5}?", "[a-z0-9_]{2,5}?"),
        ("(?:ab|cd)+\\.", "(?:ab|cd)+\\."),
        ("x y", "x y"),
        ("é+", "é+"),
        ("€", "\\x{20ac}"),
    ],
)
def test_patterns_both_dialects_read_alike_are_translated(pattern: str, java: str) -> None:
    assert java_pattern(pattern) == java


@pytest.mark.parametrize(
    "pattern", ["\\d", "\\w+", "\\bword", "(?=a)", "(?<n>a)", "(a)\\1", "[[a]]", "[a&&b]", "a*+",
                "\\p{L}", "a{", "[]a]"],
)  # fmt: skip
def test_patterns_the_dialects_read_differently_are_refused(pattern: str) -> None:
    assert java_pattern(pattern) is None


def test_translated_patterns_match_like_the_schema_validator() -> None:
    import jsonschema_rs

    for pattern in ("^device-[0-9]{3}$", "^a.b$", "^(x|yz)+$", "^[^-]+-[a-f]?$"):
        java = java_pattern(pattern)
        assert java is not None
        # Python's re reads these translated forms as Java does, but for \z and \x{..}
        python = re.compile(java.replace("\\z", "\\Z").replace("\\u2028", "\u2028")
                            .replace("\\u2029", "\u2029"))  # fmt: skip
        validator = jsonschema_rs.validator_for({"type": "string", "pattern": pattern})
        for text in ("device-001", "device-01", "a\rb", "a-b", "axb", "xyzx", "ab-c", "yzx\n"):
            assert bool(python.search(text)) == validator.is_valid(text), (pattern, text)

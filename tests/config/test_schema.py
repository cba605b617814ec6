"""The schema, assembled from the ``schema.json`` each part of ssegate keeps beside its code."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest

from ssegate.config.schema import PARTS, merge_part, schema
from ssegate.engine.assembly import FACTORIES


def _part(name: str) -> dict[str, Any]:
    text = resources.files("ssegate").joinpath(f"{name}/schema.json").read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def test_every_binding_the_runtime_builds_has_its_definition_and_no_other() -> None:
    roles = {tuple(role.split(".", 1)) for role in schema()["$defs"]["bindings"]}
    assert roles == set(FACTORIES)


@pytest.mark.parametrize("part", [p for p in PARTS if p.startswith("bindings/")])
def test_a_binding_package_defines_only_its_own_type(part: str) -> None:
    type_ = part.removeprefix("bindings/").replace("_", "-")
    defined = _part(part)["$defs"]["bindings"]
    assert defined
    assert {role.split(".")[0] for role in defined} == {type_}


def test_the_binding_rule_dispatches_each_type_and_kind_to_its_definition() -> None:
    rules = schema()["$defs"]["binding"]["allOf"]
    assert rules[0] == {
        "if": {
            "properties": {"type": {"const": "tcp"}, "kind": {"const": "server"}},
            "required": ["type", "kind"],
        },
        "then": {"$ref": "#/$defs/bindings/tcp.server"},
    }
    assert [rule["then"]["$ref"].rsplit("/", 1)[1] for rule in rules] == list(
        schema()["$defs"]["bindings"]
    )


def test_a_definition_two_parts_give_is_refused() -> None:
    defs: dict[str, Any] = {"options": {"tcp": {}}, "guard": {}}
    with pytest.raises(ValueError, match=r"b/schema.json: \$defs.options.tcp is already defined"):
        merge_part(defs, {"options": {"tcp": {"type": "object"}}}, "b/schema.json")
    with pytest.raises(ValueError, match=r"c/schema.json: \$defs.guard is already defined"):
        merge_part(defs, {"guard": {}}, "c/schema.json")
    merge_part(defs, {"options": {"tls": {}}, "when": {"tls": {}}}, "d/schema.json")
    assert defs == {"options": {"tcp": {}, "tls": {}}, "when": {"tls": {}}, "guard": {}}

"""The JSON Schema of ``zilla.yaml``, assembled from the parts that own each option.

``config/schema.json`` holds the top level (``name``, ``bindings``, ``guards``, ``vaults``,
``catalogs``, ``telemetry``) and the definitions every part shares (``name``, ``exit``,
``port``, ``guarded``, ...). What each binding type accepts lives next to its code, in
``bindings/<type>/schema.json``; models, guards, vaults, catalogs and telemetry exporters keep
theirs in their own package's ``schema.json``. Each of those files is a ``{"$defs": ...}`` whose
entries are added to the skeleton's ``$defs``: a plain definition (``guard``, ``model``) or a
named member of one of the :data:`SECTIONS` (``options.tcp``, ``when.tls``,
``bindings.sse.server``). Every ``$ref`` reads as if the schema were one file
(``#/$defs/options/http``), so a part may refer to another's definitions.

A definition given twice is an error: two parts never describe the same thing. Last, the
``binding`` definition gets one ``if``/``then`` per entry of ``$defs.bindings``, in the order
of :data:`PARTS` (which is the order ``validate`` lists the supported types in).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

PARTS = (
    "bindings/tcp",
    "bindings/tls",
    "bindings/http",
    "bindings/http_filesystem",
    "bindings/filesystem",
    "bindings/sse",
    "bindings/sse_kafka",
    "bindings/kafka",
    "bindings/asyncapi",
    "models",
    "guards",
    "vaults",
    "catalogs",
    "telemetry",
)
"""The folders, under the ``ssegate`` package, whose ``schema.json`` is part of the schema."""

SECTIONS = ("options", "when", "with", "bindings")
"""``$defs`` entries that gather definitions from several parts, each under its own name."""


@cache
def schema() -> dict[str, Any]:
    """The whole JSON Schema (draft 2019-09): the skeleton with every part merged in."""
    assembled = _read("config/schema.json")
    defs: dict[str, Any] = assembled["$defs"]
    for part in PARTS:
        where = f"{part}/schema.json"
        read = _read(where)
        extra = sorted(set(read) - {"$comment", "$defs"})
        if extra:
            raise ValueError(f"{where}: a part holds $defs (and a $comment), not {extra[0]}")
        merge_part(defs, read["$defs"], where)
    defs["binding"]["allOf"] = [_dispatch(role) for role in defs.get("bindings", {})]
    return assembled


def merge_part(defs: dict[str, Any], part: Mapping[str, Any], where: str) -> None:
    """Add the ``$defs`` of one part to ``defs``; ValueError for a definition given twice."""
    for key, value in part.items():
        if key in SECTIONS:
            section = defs.setdefault(key, {})
            for name, definition in value.items():
                if name in section:
                    raise ValueError(f"{where}: $defs.{key}.{name} is already defined")
                section[name] = definition
        elif key in defs:
            raise ValueError(f"{where}: $defs.{key} is already defined")
        else:
            defs[key] = value


def _dispatch(role: str) -> dict[str, Any]:
    """``tcp.server`` → the rule that checks a binding of that type and kind against it."""
    type_, _, kind = role.partition(".")
    return {
        "if": {
            "properties": {"type": {"const": type_}, "kind": {"const": kind}},
            "required": ["type", "kind"],
        },
        "then": {"$ref": f"#/$defs/bindings/{role}"},
    }


def _read(where: str) -> dict[str, Any]:
    text = resources.files("ssegate").joinpath(where).read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded

"""Which checks of a JSON Schema Spark can run itself: a schema turned into plain check values.

The pipeline validates a ``json`` source in the JVM (:mod:`ssegate.pipeline.jvm_checks`) when
its catalog schema says only what Spark expressions can check. :func:`plan_checks` reads the
schema (the same catalog entry the gateway's ``json`` model compiles) and returns the
:class:`ObjectChecks` of its root, or raises :class:`NotInJvm` naming the first keyword that
Spark cannot check; such a source keeps the Python path, the model itself, for every record.

What the JVM checks, per property (nested objects included):

- ``type``: one of ``string``, ``number``, ``integer``, ``boolean``, ``object``, ``array``, or
  one of those with ``null`` (``["string", "null"]``); the root must be ``type: object``;
- ``required``, ``properties``, ``additionalProperties: false`` (at the root only);
- ``enum`` and ``const`` of strings, numbers or booleans of one type;
- ``minimum``, ``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum`` (draft 4's boolean
  ``exclusive*`` too), compared as doubles;
- ``minLength``, ``maxLength`` (in code points, as JSON Schema counts);
- ``pattern``, when the regular expression means the same to Java and to JSON Schema's
  ECMA 262 dialect (:func:`java_pattern`: literals, classes of literals and ranges, ``.``,
  groups, alternation, quantifiers, ``^`` and ``$``; not ``\\d``, ``\\w``, ``\\s``, ``\\b``,
  ``\\p{...}``, back references or look-arounds, which differ on non-ASCII text or in syntax);
- ``items`` (one schema, of a scalar type, with the checks above), ``minItems``, ``maxItems``;
- annotations, which check nothing: ``title``, ``description``, ``default``, ``examples``,
  ``$comment``, ``$schema``, ``$id``, ``$anchor``, ``deprecated``, ``readOnly``, ``writeOnly``,
  ``contentMediaType``, ``contentEncoding``, ``contentSchema``, ``$defs``/``definitions``
  (unused without ``$ref``), and ``format`` from draft 2019-09 on (an annotation there, as the
  gateway's validator treats it).

Everything else takes the Python path (:data:`PYTHON_ONLY` lists the keywords by name):
``$ref``, ``allOf``, ``anyOf``, ``oneOf``, ``not``, ``if``/``then``/``else``,
``dependentRequired``, ``dependentSchemas``, ``dependencies``, ``patternProperties``,
``propertyNames``, ``additionalProperties`` below the root or as a schema,
``unevaluatedProperties``, ``unevaluatedItems``, ``prefixItems``, ``items`` as a list or of
objects or arrays, ``additionalItems``, ``contains``, ``minContains``, ``maxContains``,
``uniqueItems``, ``multipleOf``, ``minProperties``, ``maxProperties``, ``format`` up to draft 7
(asserted there), ``enum``/``const`` of objects, arrays, ``null`` or mixed types, any other
type list, ``type: null``, a ``false`` subschema, a root that is not ``type: object``, an
assertion keyword without the ``type`` it applies to, and property names that Spark would
confuse (empty, differing only in case, or holding ``'`` or ``\\``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SCALARS = ("string", "number", "integer", "boolean")
KINDS = (*SCALARS, "object", "array")
ANNOTATIONS = frozenset({
    "title", "description", "default", "examples", "$comment", "$schema", "$id", "id",
    "$anchor", "deprecated", "readOnly", "writeOnly", "contentMediaType", "contentEncoding",
    "contentSchema", "$defs", "definitions", "$vocabulary", "$dynamicAnchor",
})  # fmt: skip
PYTHON_ONLY = (
    "$ref", "$dynamicRef", "$recursiveRef", "allOf", "anyOf", "oneOf", "not", "if", "then",
    "else", "dependentRequired", "dependentSchemas", "dependencies", "patternProperties",
    "propertyNames", "unevaluatedProperties", "unevaluatedItems", "prefixItems",
    "additionalItems", "contains", "minContains", "maxContains", "uniqueItems", "multipleOf",
    "minProperties", "maxProperties",
)  # fmt: skip
"""JSON Schema keywords the JVM never checks: a schema using one takes the Python path."""
_STRING_KEYWORDS = frozenset({"minLength", "maxLength", "pattern"})
_NUMBER_KEYWORDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
_ARRAY_KEYWORDS = frozenset({"items", "minItems", "maxItems"})
_OBJECT_KEYWORDS = frozenset({"properties", "required", "additionalProperties"})
_COMMON = frozenset({"type", "enum", "const"})
_OLD_DRAFTS = ("draft-03", "draft-04", "draft-06", "draft-07")


class NotInJvm(ValueError):
    """The schema says something Spark cannot check: the first such keyword and where."""

    def __init__(self, pointer: str, keyword: str, why: str = "") -> None:
        self.pointer = pointer or "/"
        self.keyword = keyword
        super().__init__(f"{self.pointer}: {keyword}{': ' + why if why else ''}")


@dataclass(frozen=True)
class ValueChecks:
    """What one value must be: its JSON type and the checks for values of that type."""

    kind: str
    """One of :data:`KINDS`, or ``any`` (no type: any value, only its presence is checked)."""
    nullable: bool = False
    enum: tuple[Any, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: float | None = None
    exclusive_maximum: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    """As written in the schema (for reasons)."""
    java_pattern: str | None = None
    """The same expression for Java's ``rlike``."""
    items: ValueChecks | None = None
    min_items: int | None = None
    max_items: int | None = None
    object: ObjectChecks | None = None


@dataclass(frozen=True)
class Property:
    name: str
    pointer: str
    """Its JSON pointer in the record (``/room/name``): what reasons name."""
    required: bool
    value: ValueChecks


@dataclass(frozen=True)
class ObjectChecks:
    properties: tuple[Property, ...] = ()
    closed: bool = False
    """``additionalProperties: false``: no other keys."""
    extra_required: tuple[str, ...] = field(default=())
    """Required names the schema gives no ``properties`` entry: present, any value."""


def plan_checks(schema_text: str) -> ObjectChecks:
    """The root's checks for a JSON Schema document. Raises NotInJvm."""
    try:
        document = json.loads(schema_text)
    except ValueError:
        raise NotInJvm("/", "schema", "not JSON") from None
    if not isinstance(document, dict):
        raise NotInJvm("/", "schema", "not an object schema")
    draft = str(document.get("$schema", ""))
    planner = _Planner(old_draft=any(d in draft for d in _OLD_DRAFTS), draft4="draft-04" in draft)
    root = planner.value(document, "", root=True)
    assert root.object is not None
    return root.object


@dataclass(frozen=True)
class _Planner:
    old_draft: bool
    draft4: bool

    def value(self, schema: Any, pointer: str, *, root: bool = False) -> ValueChecks:
        if schema is True or schema == {}:
            return ValueChecks("any")
        if not isinstance(schema, dict):
            raise NotInJvm(pointer, "schema", "a false or non-object subschema")
        for key in schema:
            if key in PYTHON_ONLY:
                raise NotInJvm(pointer, key)
            if key == "format" and self.old_draft:
                raise NotInJvm(pointer, key, "asserted before draft 2019-09")
            if key == "format" or key in ANNOTATIONS:
                continue
            if key not in _COMMON | _STRING_KEYWORDS | _NUMBER_KEYWORDS | _ARRAY_KEYWORDS | (
                _OBJECT_KEYWORDS
            ):
                raise NotInJvm(pointer, key, "not a keyword the JVM checks")
        kind, nullable = self._kind(schema, pointer)
        if root and (kind != "object" or nullable):
            raise NotInJvm(pointer, "type", "the root must be type: object")
        keywords = set(schema) - ANNOTATIONS - {"format", "type", "enum", "const"}
        allowed = {
            "string": _STRING_KEYWORDS,
            "number": _NUMBER_KEYWORDS,
            "integer": _NUMBER_KEYWORDS,
            "array": _ARRAY_KEYWORDS,
            "object": _OBJECT_KEYWORDS,
        }.get(kind, frozenset())
        for key in sorted(keywords - allowed):
            raise NotInJvm(pointer, key, f"needs the type it applies to, not {kind}")
        checks = ValueChecks(kind, nullable, enum=self._enum(schema, kind, pointer))
        if kind == "string":
            return self._string(schema, pointer, checks)
        if kind in ("number", "integer"):
            return self._number(schema, pointer, checks)
        if kind == "array":
            return self._array(schema, pointer, checks)
        if kind == "object":
            return _with(checks, object=self._object(schema, pointer, root=root))
        return checks

    def _kind(self, schema: Mapping[str, Any], pointer: str) -> tuple[str, bool]:
        declared = schema.get("type")
        if declared is None:
            values = _enum_values(schema)
            if values is None:
                return "any", False
            kinds = {_json_kind(v) for v in values}
            if len(kinds) != 1 or None in kinds:
                raise NotInJvm(pointer, "enum", "values of more than one type, or null")
            return str(kinds.pop()), False
        types = declared if isinstance(declared, list) else [declared]
        nullable = "null" in types
        rest = [t for t in types if t != "null"]
        if len(rest) != 1 or rest[0] not in KINDS or len(types) != len(rest) + nullable:
            raise NotInJvm(pointer, "type", f"{json.dumps(declared)} is not one type (or null)")
        return str(rest[0]), nullable

    def _enum(self, schema: Mapping[str, Any], kind: str, pointer: str) -> tuple[Any, ...] | None:
        values = _enum_values(schema)
        if values is None:
            return None
        wanted = {"integer": "number"}.get(kind, kind)
        if not values or any(_json_kind(v) != wanted for v in values):
            raise NotInJvm(pointer, "enum", f"values other than {kind}s")
        return tuple(values)

    def _string(self, schema: Mapping[str, Any], pointer: str, checks: ValueChecks) -> ValueChecks:
        pattern = schema.get("pattern")
        translated = None
        if pattern is not None:
            if not isinstance(pattern, str):
                raise NotInJvm(pointer, "pattern", "not a string")
            translated = java_pattern(pattern)
            if translated is None:
                raise NotInJvm(pointer, "pattern", "Java and ECMA 262 may read it differently")
        return _with(
            checks,
            min_length=_count(schema, "minLength", pointer),
            max_length=_count(schema, "maxLength", pointer),
            pattern=pattern,
            java_pattern=translated,
        )

    def _number(self, schema: Mapping[str, Any], pointer: str, checks: ValueChecks) -> ValueChecks:
        bounds = {k: _number(schema, k, pointer) for k in _NUMBER_KEYWORDS}
        minimum, maximum = bounds["minimum"], bounds["maximum"]
        low, high = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
        if self.draft4 and isinstance(low, bool):
            bounds["exclusiveMinimum"], minimum = (minimum, None) if low else (None, minimum)
        if self.draft4 and isinstance(high, bool):
            bounds["exclusiveMaximum"], maximum = (maximum, None) if high else (None, maximum)
        return _with(
            checks,
            minimum=minimum,
            maximum=maximum,
            exclusive_minimum=bounds["exclusiveMinimum"],
            exclusive_maximum=bounds["exclusiveMaximum"],
        )

    def _array(self, schema: Mapping[str, Any], pointer: str, checks: ValueChecks) -> ValueChecks:
        items = None
        if "items" in schema:
            if not isinstance(schema["items"], dict | bool):
                raise NotInJvm(pointer, "items", "a list of schemas")
            items = self.value(schema["items"], f"{pointer}/items")
            if items.kind not in (*SCALARS, "any"):
                raise NotInJvm(pointer, "items", "items that are objects or arrays")
        return _with(
            checks,
            items=items,
            min_items=_count(schema, "minItems", pointer),
            max_items=_count(schema, "maxItems", pointer),
        )

    def _object(self, schema: Mapping[str, Any], pointer: str, *, root: bool) -> ObjectChecks:
        properties = schema.get("properties", {})
        required = schema.get("required", [])
        if not isinstance(properties, dict) or not isinstance(required, list):
            raise NotInJvm(pointer, "properties", "not an object of schemas")
        if not all(isinstance(name, str) for name in required):
            raise NotInJvm(pointer, "required", "not a list of names")
        extra = schema.get("additionalProperties", True)
        if extra is not True and (extra is not False or not root):
            raise NotInJvm(pointer, "additionalProperties", "only false, at the root")
        names = [*properties, *(n for n in required if n not in properties)]
        folded = [n.lower() for n in names]
        for name in names:
            if not name or "'" in name or "\\" in name or folded.count(name.lower()) > 1:
                raise NotInJvm(f"{pointer}/{name}", "properties", "a name Spark would confuse")
        return ObjectChecks(
            properties=tuple(
                Property(
                    name,
                    f"{pointer}/{name}",
                    name in required,
                    self.value(sub, f"{pointer}/{name}"),
                )
                for name, sub in properties.items()
            ),
            closed=extra is False,
            extra_required=tuple(dict.fromkeys(n for n in required if n not in properties)),
        )


def _with(checks: ValueChecks, **changes: Any) -> ValueChecks:
    from dataclasses import replace

    return replace(checks, **changes)


def _enum_values(schema: Mapping[str, Any]) -> list[Any] | None:
    if "const" in schema:
        return [schema["const"]]
    if "enum" in schema:
        values = schema["enum"]
        return list(values) if isinstance(values, list) else [object()]
    return None


def _json_kind(value: Any) -> str | None:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float) and math.isfinite(value):
        return "number"
    if isinstance(value, str):
        return "string"
    return None


def _count(schema: Mapping[str, Any], key: str, pointer: str) -> int | None:
    value = schema.get(key)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise NotInJvm(pointer, key, "not a whole number")
    return value


def _number(schema: Mapping[str, Any], key: str, pointer: str) -> float | None:
    value = schema.get(key)
    if value is None or isinstance(value, bool):
        return None
    if not isinstance(value, int | float):
        raise NotInJvm(pointer, key, "not a number")
    return float(value)


# -- regular expressions ------------------------------------------------------------------------

_LITERAL_ESCAPES = frozenset(r".^$*+?()[]{}|\/-")
_CONTROL_ESCAPES = {"t": r"\t", "n": r"\n", "r": r"\r", "f": r"\f", "v": r"\x0B"}
_QUANTIFIER = re.compile(r"\{(\d+)(,(\d*))?\}")


def java_pattern(pattern: str) -> str | None:
    """``pattern`` for Java's regex engine with the meaning ECMA 262 gives it, or ``None`` when
    it uses something the two read differently (or that this translation does not know).

    ``.`` becomes ``[^\\n\\r\\u2028\\u2029]`` and ``$`` becomes ``\\z``: Java's ``.`` also stops
    at ``\\u0085``, and its ``$`` also matches before a final line break.
    """
    out: list[str] = []
    index, size = 0, len(pattern)
    quantifiable = False
    while index < size:
        char = pattern[index]
        if char == "\\":
            escaped = _escape(pattern, index)
            if escaped is None:
                return None
            out.append(escaped)
            index += 2
            quantifiable = True
        elif char == "[":
            end = _class_end(pattern, index)
            if end is None:
                return None
            out.append(pattern[index : end + 1])
            index = end + 1
            quantifiable = True
        elif char == "(":
            if pattern.startswith("(?", index) and not pattern.startswith("(?:", index):
                return None
            out.append(pattern[index : index + (3 if pattern.startswith("(?:", index) else 1)])
            index += 3 if pattern.startswith("(?:", index) else 1
            quantifiable = False
        elif char in "*+?{":
            if not quantifiable:
                return None
            if char == "{":
                match = _QUANTIFIER.match(pattern, index)
                if match is None:
                    return None
                out.append(match.group(0))
                index = match.end()
            else:
                out.append(char)
                index += 1
            if index < size and pattern[index] == "?":  # lazy: the same in both
                out.append("?")
                index += 1
            if index < size and pattern[index] in "*+?{":
                return None  # possessive in Java, an error in ECMA 262
            quantifiable = False
        elif char == ".":
            out.append("[^\\n\\r\\u2028\\u2029]")
            index += 1
            quantifiable = True
        elif char == "$":
            out.append("\\z")
            index += 1
            quantifiable = False
        elif char in ")|^":
            out.append(char)
            index += 1
            quantifiable = char == ")"
        elif char == "]" or char == "}":
            return None
        else:
            out.append(_literal(char))
            index += 1
            quantifiable = True
    return "".join(out)


def _escape(pattern: str, index: int) -> str | None:
    if index + 1 >= len(pattern):
        return None
    char = pattern[index + 1]
    if char in _LITERAL_ESCAPES:
        return "\\" + char
    return _CONTROL_ESCAPES.get(char)


def _class_end(pattern: str, start: int) -> int | None:
    """Where a class of literals and ranges ends (its ``]``), or ``None`` for anything else."""
    index = start + 1
    if index < len(pattern) and pattern[index] == "^":
        index += 1
    first = True
    while index < len(pattern):
        char = pattern[index]
        if char == "]" and not first:
            return index
        if char == "]" or char == "[" or pattern.startswith("&&", index):
            return None
        if char == "\\":
            if _escape(pattern, index) is None:
                return None
            index += 2
        else:
            index += 1
        first = False
    return None


def _literal(char: str) -> str:
    return char if char.isalnum() or char in " _-,:;'\"<>=!@#%&~`/" else f"\\x{{{ord(char):x}}}"

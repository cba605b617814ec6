"""The protobuf model: messages written by the real protobuf runtime from a descriptor built by
hand here (not compiled from the ``.proto`` text the model reads), checked and viewed as JSON;
well-known types, maps, nested messages, editions and groups as protoc reads them; the
Confluent framing with message indexes; invalid bytes refused with a reason; ``.proto`` errors
with their line and column; ``record``; pickling."""

from __future__ import annotations

import base64
import json
import pickle
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, duration_pb2, struct_pb2, timestamp_pb2, wrappers_pb2
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from ssegate.catalogs import CatalogSet
from ssegate.catalogs.local import build_inline
from ssegate.config.errors import ConfigError
from ssegate.models import ProtobufModel, build_model, proto_compiler
from ssegate.models.proto_compiler import compile_proto
from ssegate.models.schemas import frame

READING_PROTO = """
syntax = "proto3";
package demo.v1;

import "google/protobuf/timestamp.proto";

/* One reading of one device. */
message Reading {
  string device = 1;
  double celsius = 2;
  optional string note = 3;
  repeated sint32 samples = 4;
  map<string, Tag> tags = 5;   // the entry message comes first among the nested messages
  oneof place {
    string room = 6;
    Point point = 7;
  }
  Kind kind = 8;
  google.protobuf.Timestamp at = 9;
  int64 sequence = 10;
  bytes raw = 11;

  message Tag { string value = 1; }
  enum Kind { KIND_UNKNOWN = 0; INDOOR = 1; OUTDOOR = 2; }
}

message Point {
  sint64 x = 1;
  sint64 y = 2;
}
"""
ORDER_PROTO = """
syntax = "proto2";
message Order {
  required int64 id = 1;
  optional string item = 2 [default = "tea"];
  optional Line line = 3;
  optional bytes code = 4 [default = "\\001A"];
  optional Size size = 5 [default = LARGE];
  optional sint32 delta = 6 [default = -0x10];
  message Line { required int32 count = 1; }
  enum Size { SMALL = 1; LARGE = 2; }
  reserved 9, 20 to max;
  extensions 10 to 19;
}
service Orders { rpc Get (Order) returns (Order) { option deprecated = true; } }
"""
WHERE = "bindings.south.options.topics[0].value"
F = descriptor_pb2.FieldDescriptorProto


def reading_file() -> descriptor_pb2.FileDescriptorProto:
    """``READING_PROTO`` written out by hand as a descriptor."""
    file = descriptor_pb2.FileDescriptorProto(
        name="schema.proto",
        package="demo.v1",
        syntax="proto3",
        dependency=["google/protobuf/timestamp.proto"],
    )
    reading = file.message_type.add(name="Reading")
    optional, repeated = F.LABEL_OPTIONAL, F.LABEL_REPEATED
    fields: list[tuple[str, int, Any, Any, str]] = [
        ("device", 1, optional, F.TYPE_STRING, ""),
        ("celsius", 2, optional, F.TYPE_DOUBLE, ""),
        ("note", 3, optional, F.TYPE_STRING, ""),
        ("samples", 4, repeated, F.TYPE_SINT32, ""),
        ("tags", 5, repeated, F.TYPE_MESSAGE, ".demo.v1.Reading.TagsEntry"),
        ("room", 6, optional, F.TYPE_STRING, ""),
        ("point", 7, optional, F.TYPE_MESSAGE, ".demo.v1.Point"),
        ("kind", 8, optional, F.TYPE_ENUM, ".demo.v1.Reading.Kind"),
        ("at", 9, optional, F.TYPE_MESSAGE, ".google.protobuf.Timestamp"),
        ("sequence", 10, optional, F.TYPE_INT64, ""),
        ("raw", 11, optional, F.TYPE_BYTES, ""),
    ]
    for name, number, label, kind, type_name in fields:
        field = reading.field.add(name=name, number=number, label=label, type=kind)
        if type_name:
            field.type_name = type_name
    reading.oneof_decl.add(name="place")
    reading.oneof_decl.add(name="_note")
    reading.field[2].proto3_optional = True
    reading.field[2].oneof_index = 1
    reading.field[5].oneof_index = reading.field[6].oneof_index = 0
    entry = reading.nested_type.add(name="TagsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, label=optional, type=F.TYPE_STRING)
    entry.field.add(
        name="value",
        number=2,
        label=optional,
        type=F.TYPE_MESSAGE,
        type_name=".demo.v1.Reading.Tag",
    )
    tag = reading.nested_type.add(name="Tag")
    tag.field.add(name="value", number=1, label=optional, type=F.TYPE_STRING)
    kinds = reading.enum_type.add(name="Kind")
    for number, name in enumerate(("KIND_UNKNOWN", "INDOOR", "OUTDOOR")):
        kinds.value.add(name=name, number=number)
    point = file.message_type.add(name="Point")
    point.field.add(name="x", number=1, label=optional, type=F.TYPE_SINT64)
    point.field.add(name="y", number=2, label=optional, type=F.TYPE_SINT64)
    return file


def reference_classes() -> dict[str, type[Message]]:
    """Message classes of the hand-written descriptor, in a pool of their own."""
    pool = DescriptorPool()
    timestamp = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(timestamp)
    pool.Add(timestamp)
    pool.Add(reading_file())
    names = ("Reading", "Reading.Tag", "Point")
    return {n: GetMessageClass(pool.FindMessageTypeByName(f"demo.v1.{n}")) for n in names}


CLASSES = reference_classes()


def catalogs(**extra: str) -> CatalogSet:
    subjects = {"readings-value": {"schema": READING_PROTO}, "orders": {"schema": ORDER_PROTO}}
    subjects.update({name: {"schema": text} for name, text in extra.items()})
    return CatalogSet({"local": build_inline("local", {"subjects": subjects}, "catalogs.local")})


def model(view: str | None = "json", **entry: Any) -> ProtobufModel:
    spec: dict[str, Any] = {
        "model": "protobuf",
        "catalog": {"local": [entry or {"subject": "readings-value"}]},
    }
    if view is not None:
        spec["view"] = view
    built = build_model(spec, WHERE, catalogs())
    assert isinstance(built, ProtobufModel)
    return built


def reading(**fields: Any) -> Any:
    return CLASSES["Reading"](**fields)


def framed(message: Message, indexes: bytes = b"\x00", schema_id: int = 1) -> bytes:
    return frame(schema_id, indexes + message.SerializeToString())


FULL = reading(
    device="d1", celsius=21.5, note="", samples=[1, -2], room="kitchen", kind=2, sequence=2**60
)
FULL.tags["hall"].value = "north"
FULL.at.FromSeconds(1_700_000_000)
FULL.raw = b"\x00\x01"


# -- the schema text -----------------------------------------------------------------------------


def test_protoc_builds_the_same_descriptor_as_the_one_written_by_hand() -> None:
    *imports, compiled = compile_proto(READING_PROTO)
    assert [file.name for file in imports] == ["google/protobuf/timestamp.proto"]
    for message in (*compiled.message_type, *compiled.message_type[0].nested_type):
        for field in message.field:
            field.ClearField("json_name")  # protoc writes each field's; the reference has none
    assert compiled == reading_file()


def test_proto2_defaults_enums_and_required_fields_are_read() -> None:
    order = model(subject="orders").schemas.configured.by_name["Order"]
    empty: Any = order.new()
    assert (empty.item, empty.code, empty.size, empty.delta) == ("tea", b"\x01A", 2, -16)
    assert order.required and order.nested


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        ('syntax = "proto3";\nmessage A {\n  string a = 1\n}\n', "line 4, column 1", '";"'),
        ('syntax = "proto3";\nmessage A {\n  Foo a = 1;\n}\n', "line 3, column 3", '"Foo" is not'),
        (
            'syntax = "proto3";\nmessage A {\n  string a = 1;\n  int32 b = 1;\n}',
            "line 4, column 13",
            'Field number 1 has already been used in "A" by field "a"',
        ),
        (
            'syntax = "proto3";\nimport "x.proto";',
            "line 2, column 1",
            'Import "x.proto" was not found or had errors. Only the google/protobuf files can',
        ),
        ('syntax = "proto3;\n', "line 1, column 18", "Multiline strings are not allowed"),
        ("message A {}\n  $", "line 2, column 3", "Expected top-level statement"),
        ('syntax = "proto3";\nenum E { A = 1; }', "line 2, column 14", "must be zero"),
        ("message A { map<float, string> m = 1; }", "line 1, column 13", "Key in map fields"),
        ('syntax = "proto3";\nmessage A { required int32 a = 1; }', "line 2, column 22", "proto3"),
        ("/* open\n\nmessage A {}", "line 3, column 13", "End-of-file inside block comment"),
        ('edition = "2099";', "line 1, column 11", 'Unknown edition "2099"'),
        (
            'syntax = "proto3";\nmessage A { string foo_bar = 1; string fooBar = 2; }',
            "line 2, column 40",
            'The default JSON name of field "fooBar" ("fooBar") conflicts',
        ),
        (
            'syntax = "proto3";\nmessage A {\n\tstring a = x;\n}',
            "line 3, column 20",
            "Expected field number",
        ),
    ],
)
def test_proto_errors_are_config_errors_with_line_and_column(
    text: str, where: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        build_model(
            {"model": "protobuf", "catalog": {"local": [{"subject": "bad"}]}},
            WHERE,
            catalogs(bad=text),
        )
    assert raised.value.path == f"{WHERE}.catalog.local"
    assert f"{where}: " in raised.value.message and problem in raised.value.message


def test_protobuf_needs_a_catalog() -> None:
    with pytest.raises(ConfigError) as raised:
        build_model("protobuf", WHERE)
    assert raised.value.path == WHERE
    assert "needs a catalog" in raised.value.message


# -- valid messages and their JSON view ----------------------------------------------------------


def test_a_message_is_valid_and_its_json_view_keeps_the_proto_field_names() -> None:
    checked = model()
    data = framed(FULL)
    assert checked.validate(data) is None
    assert json.loads(checked.to_text(data)) == {
        "device": "d1",
        "celsius": 21.5,
        "note": "",
        "samples": [1, -2],
        "tags": {"hall": {"value": "north"}},
        "room": "kitchen",
        "kind": "OUTDOOR",
        "at": "2023-11-14T22:13:20Z",
        "sequence": str(2**60),
        "raw": "AAE=",
    }


def test_fields_without_presence_are_written_with_their_defaults() -> None:
    data = framed(reading(device="d2"))
    checked = model()
    assert checked.validate(data) is None
    assert checked.to_text(data) == (
        '{"device":"d2","celsius":0.0,"samples":[],"tags":{},"kind":"KIND_UNKNOWN",'
        '"sequence":"0","raw":""}'
    )


def test_without_a_view_the_event_carries_the_message_in_base64() -> None:
    data = framed(FULL)
    checked = model(view=None)
    assert checked.validate(data) is None
    assert base64.b64decode(checked.to_text(data)) == data


def test_message_indexes_pick_a_later_or_a_nested_message() -> None:
    checked = model()
    point = CLASSES["Point"](x=3, y=-4)
    tag = CLASSES["Reading.Tag"](value="t")
    assert checked.validate(framed(point, b"\x02\x02")) is None  # [1]
    assert checked.to_text(framed(point, b"\x02\x02")) == '{"x":"3","y":"-4"}'
    assert checked.validate(framed(tag, b"\x04\x00\x02")) is None  # [0, 1]: Tag after TagsEntry
    assert checked.to_text(framed(tag, b"\x04\x00\x02")) == '{"value":"t"}'
    assert checked.validate(framed(FULL, b"\x02\x00")) is None  # [0] written out in full


def test_a_second_schema_id_is_compiled_when_a_message_names_it() -> None:
    checked = model(subject="readings-value")
    order = b"\x08\x07\x1a\x02\x08\x01"  # id 7, line {count 1}
    assert checked.validate(frame(2, b"\x00" + order)) is None
    assert json.loads(checked.to_text(frame(2, b"\x00" + order))) == {
        "id": "7",
        "line": {"count": 1},
    }


# -- what protoc reads beyond the schemas above ----------------------------------------------------

PROBE_PROTO = """
syntax = "proto3";
import "google/protobuf/duration.proto";
import "google/protobuf/struct.proto";
import "google/protobuf/wrappers.proto";
message Probe {
  google.protobuf.Duration took = 1;
  google.protobuf.Struct extra = 2;
  google.protobuf.Int32Value retries = 3;
  map<string, int64> counts = 4;
  Outer.Middle.Inner deepest = 5;
}
message Outer { message Middle { message Inner { string v = 1; } } }
"""


def length_delimited(number: int, payload: bytes) -> bytes:
    return bytes([number << 3 | 2, len(payload)]) + payload


def built(subject: str, text: str, **entry: Any) -> Any:
    spec = {"model": "protobuf", "view": "json", "catalog": {"local": [{"subject": subject}]}}
    spec["catalog"]["local"][0].update(entry)
    return build_model(spec, WHERE, catalogs(**{subject: text}))


def test_well_known_types_and_scalar_maps_are_written_in_their_json_form() -> None:
    checked = built("probe", PROBE_PROTO)
    extra = struct_pb2.Struct()
    extra.update({"a": [1, "x"]})
    body = b"".join(
        (
            length_delimited(1, duration_pb2.Duration(seconds=90).SerializeToString()),
            length_delimited(2, extra.SerializeToString()),
            length_delimited(3, wrappers_pb2.Int32Value(value=3).SerializeToString()),
            length_delimited(4, b"\x0a\x01k\x10\x05"),  # key "k", value 5
            length_delimited(5, b"\x0a\x01v"),
        )
    )
    data = frame(3, b"\x00" + body)
    assert checked.validate(data) is None
    assert json.loads(checked.to_text(data)) == {
        "took": "90s",
        "extra": {"a": [1.0, "x"]},
        "retries": 3,
        "counts": {"k": "5"},
        "deepest": {"v": "v"},
    }


def test_a_message_nested_two_deep_is_picked_by_its_index_path_and_named_as_the_record() -> None:
    checked = built("probe", PROBE_PROTO, record="Outer.Middle.Inner")
    inner = b"\x06\x02\x00\x00" + b"\x0a\x01v"  # indexes [1, 0, 0]
    assert checked.validate(frame(3, inner)) is None
    assert checked.to_text(frame(3, inner)) == '{"v":"v"}'
    found = checked.validate(frame(3, b"\x00"))
    assert found == "message index [0] is 'Probe', not the record 'Outer.Middle.Inner'"


def test_an_editions_schema_is_checked_with_its_features() -> None:
    text = (
        'edition = "2023";\n'
        "message Item {\n"
        "  string name = 1;\n"
        "  int32 count = 2 [features.field_presence = IMPLICIT];\n"
        "  int32 left = 3 [features.field_presence = LEGACY_REQUIRED];\n"
        "}\n"
    )
    checked = built("item", text)
    data = frame(3, b"\x00\x0a\x02ab\x18\x01")
    assert checked.validate(data) is None
    assert json.loads(checked.to_text(data)) == {"name": "ab", "count": 0, "left": 1}
    assert checked.validate(frame(3, b"\x00\x0a\x02ab")) == (
        "Item of schema id 3 lacks required left"
    )
    found = checked.validate(frame(3, b"\x00\x0a\x02\xff\xfe\x18\x01"))
    assert found is not None and "field 'name' at byte 8 is not UTF-8" in found


def test_proto2_groups_and_custom_options_are_read() -> None:
    text = (
        'syntax = "proto2";\n'
        'import "google/protobuf/descriptor.proto";\n'
        "extend google.protobuf.FieldOptions { optional string unit = 50001; }\n"
        "message Sample {\n"
        '  optional double celsius = 1 [(unit) = "C"];\n'
        "  optional group Place = 2 { optional string room = 3; }\n"
        "}\n"
    )
    checked = built("sample", text)
    data = frame(3, b"\x00\x13\x1a\x04hall\x14")  # Place {room: "hall"}, as a group
    assert checked.validate(data) is None
    assert json.loads(checked.to_text(data)) == {"place": {"room": "hall"}}


# -- invalid messages ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"device": "d1"}', "not in the Confluent wire format"),
        (framed(FULL, schema_id=9), "schema id 9: catalog 'local' has no schema with id 9"),
        (framed(FULL, b"\x02\x0a"), "message index [5] names no message of schema id 1"),
        (framed(FULL, b"\x01"), "message count -1 at byte 5 is negative"),
        (frame(1, b"\x06\x00"), "the message-index list is cut short at byte 7"),
        (frame(1, b"\x80"), "the varint at byte 5 is cut short"),
        (framed(FULL)[:-3], "not a Reading of schema id 1: field 11 at byte "),
        (framed(FULL) + b"\x0f", f"field 1 at byte {len(framed(FULL))} has wire type 7"),
        (framed(FULL) + b"\x60\x01", "field 12 (varint) is not in demo.v1.Reading"),
        (framed(FULL) + b"\x08\x01", "field 1 'device' of demo.v1.Reading came as varint"),
        (frame(1, b"\x00\x0a\x02\xff\xfe"), "field 'device' at byte 8 is not UTF-8"),
        (frame(1, b"\x00\x3a\x04\x08\x02\x18\x05"), "field 3 (varint) is not in demo.v1.Point"),
        (frame(1, b"\x00\x3a\x03\x08\x02\x18"), "in field 'point': field 3 at byte 10: its varint"),
        (frame(1, b"\x00\x22\x02\x02\x80"), "packed field 'samples': the varint at byte 9 is"),
        (frame(2, b"\x00\x08\x01\x28\x07"), "'size' of Order holds a number enum Size does not"),
        (frame(2, b"\x00\x12\x03abc"), "Order of schema id 2 lacks required id"),
        (frame(2, b"\x00\x08\x01\x1a\x00"), "Order of schema id 2 lacks required line.count"),
    ],
)
def test_invalid_messages_are_refused_with_a_reason(data: bytes, reason: str) -> None:
    found = model().validate(data)
    assert found is not None and reason in found
    assert len(found) <= 200 and "\n" not in found


def test_a_schema_id_whose_text_does_not_parse_makes_its_messages_invalid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = {"model": "protobuf", "catalog": {"local": [{"subject": "readings-value"}]}}
    checked = build_model(spec, WHERE, catalogs(broken="message {"))
    found = checked.validate(frame(3, b"\x00"))
    assert found is not None
    assert found.startswith("schema id 3 is not a usable protobuf schema: line 1, column 9:")
    monkeypatch.setattr(proto_compiler, "TIMEOUT", 0.000001)  # any run of protoc now fails
    assert checked.validate(frame(3, b"\x00")) == found  # refused again, not compiled again


def test_an_any_is_written_as_json_only_when_the_schema_knows_its_type() -> None:
    box = 'syntax = "proto3";\nimport "google/protobuf/any.proto";\n'
    box += "message Box { google.protobuf.Any item = 1; }"
    spec = {"model": "protobuf", "view": "json", "catalog": {"local": [{"subject": "box"}]}}
    checked = build_model(spec, WHERE, catalogs(box=box))

    def boxed(type_url: bytes, value: bytes) -> bytes:
        item = b"\x0a" + bytes([len(type_url)]) + type_url + b"\x12" + bytes([len(value)]) + value
        return frame(3, b"\x00\x0a" + bytes([len(item)]) + item)

    known = boxed(b"type.googleapis.com/Box", b"")
    assert checked.validate(known) is None
    assert json.loads(checked.to_text(known)) == {"item": {"@type": "type.googleapis.com/Box"}}
    found = checked.validate(boxed(b"type.googleapis.com/nope.Nope", b""))
    assert found is not None and found.startswith("Box has no JSON form")


def test_to_text_refuses_an_invalid_message_it_is_handed_directly() -> None:
    with pytest.raises(ValueError, match="not in the Confluent wire format"):
        model().to_text(b"plain")


# -- record ---------------------------------------------------------------------------------------


def test_a_record_limits_which_message_a_topic_may_carry() -> None:
    checked = model(subject="readings-value", record="Point")
    point = CLASSES["Point"](x=1)
    assert checked.validate(framed(point, b"\x02\x02")) is None
    found = checked.validate(framed(FULL))
    assert found == "message index [0] is 'Reading', not the record 'Point'"
    assert model(subject="readings-value", record="demo.v1.Reading.Tag").record == "Reading.Tag"


def test_a_record_the_schema_lacks_is_a_config_error_at_its_yaml_path() -> None:
    with pytest.raises(ConfigError) as raised:
        model(subject="readings-value", record="Nope")
    assert raised.value.path == f"{WHERE}.catalog.local[0].record"
    assert "no message 'Nope'" in raised.value.message and "Reading.Tag" in raised.value.message


def test_the_topic_strategy_names_the_subject() -> None:
    spec = {"model": "protobuf", "catalog": {"local": [{"strategy": "topic"}]}}
    checked = build_model(spec, WHERE, catalogs(), topic="readings")
    assert checked.validate(framed(FULL)) is None


# -- pickling --------------------------------------------------------------------------------------


def test_a_protobuf_model_pickles_as_its_arguments_and_checks_the_same() -> None:
    original = model(subject="readings-value", record="Reading")
    copy = pickle.loads(pickle.dumps(original))
    assert isinstance(copy, ProtobufModel) and copy.record == "Reading"
    data = framed(FULL)
    assert copy.validate(data) is None and copy.to_text(data) == original.to_text(data)
    assert copy.validate(data[:-1]) == original.validate(data[:-1])

"""The ``protobuf`` model: protobuf messages in the Confluent wire format, schemas as ``.proto``.

A message is valid when it is framed (magic byte ``0``, 4-byte big-endian schema id, then the
message-index list, see :mod:`~ssegate.models.proto_wire`), its id names a ``.proto`` schema in
the model's catalog, its indexes name a message of that schema, and the payload parses as that
message with nothing left over: no field the message does not declare (or declares with another
wire type), proto3 strings in UTF-8, and every proto2 ``required`` field present.

``record`` in the catalog entry (``{subject: items, record: Item}``, as in Zilla) names the
message the topic carries, by its path in the file (``Outer.Inner``) or its full name; it must
exist in the configured schema, and a message whose indexes name another message is invalid.
Without ``record`` any message of the schema is accepted.

``view: json`` writes the message with protobuf's JSON mapping, as Zilla prints it: field
names as written in the ``.proto``, fields without presence included with their default,
64-bit integers as strings, bytes in base64, enums by name, well-known types in their own JSON
form. Without a view the event carries the message as received, in base64.

Each schema is compiled once by protoc (:mod:`~ssegate.models.proto_compiler`) into a private
descriptor pool, with the message class of every message it defines; a message is then checked
with ``ParseFromString`` and a few lookups. The ``google/protobuf`` files (the well-known types)
can be imported.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.descriptor_pb2 import DescriptorProto, FeatureSet, FileDescriptorProto
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import DecodeError, Message
from google.protobuf.message_factory import GetMessageClass
from google.protobuf.unknown_fields import UnknownFieldSet

from ssegate.catalogs import CatalogSet, Schema
from ssegate.config.errors import ConfigError
from ssegate.models.framed import FramedModel, InvalidMessage
from ssegate.models.proto_compiler import compile_proto
from ssegate.models.proto_wire import WIRE_TYPES, WireError, explain, message_indexes
from ssegate.models.schemas import HEADER_SIZE


@dataclass(frozen=True, slots=True)
class MessageType:
    """One message of a schema, ready to parse."""

    name: str
    """Its path in the file (``Outer.Inner``), what ``record`` names."""
    descriptor: Descriptor
    new: Callable[[], Message]
    nested: bool
    """It has message fields, so unknown fields may hide below the top level."""
    required: bool
    """It has proto2 ``required`` fields, here or in a message below."""
    any: bool
    """It holds a ``google.protobuf.Any`` somewhere (its JSON needs the packed type)."""


class ProtoSchema:
    """A compiled ``.proto`` schema: its message types by Confluent index path and by name."""

    def __init__(self, schema: Schema) -> None:
        files = compile_proto(schema.text)
        file = files[-1]
        self.pool = DescriptorPool()
        self.utf8 = _checks_utf8(file)
        self.package = file.package
        try:
            for each in files:
                self.pool.Add(each)
        except Exception as exc:  # the runtime's own checks, should protoc let something by
            raise ValueError(str(exc).replace("\n", " ")) from None
        self.by_indexes: dict[tuple[int, ...], MessageType] = {}
        self.by_name: dict[str, MessageType] = {}
        for indexes, name in _message_paths(file.message_type, (), ""):
            full = f"{file.package}.{name}" if file.package else name
            descriptor = self.pool.FindMessageTypeByName(full)
            kind = MessageType(
                name,
                descriptor,
                GetMessageClass(descriptor),
                any(f.type == FieldDescriptor.TYPE_MESSAGE for f in descriptor.fields),
                _reaches(descriptor, lambda d: any(f.is_required for f in d.fields)),
                _reaches(descriptor, lambda d: d.full_name == "google.protobuf.Any"),
            )
            self.by_indexes[indexes] = self.by_name[name] = kind
        if not self.by_indexes:
            raise ValueError("the schema defines no message")

    def find(self, record: str) -> MessageType | None:
        """The message ``record`` names: its path in the file, or its full name."""
        name = record.lstrip(".")
        found = self.by_name.get(name)
        if found is None and self.package and name.startswith(f"{self.package}."):
            found = self.by_name.get(name[len(self.package) + 1 :])
        return found


class ProtobufModel(FramedModel[ProtoSchema, Message]):
    """``model: protobuf`` with a ``catalog`` (optionally naming a ``record``) and an optional
    ``view: json``."""

    model = "protobuf"
    schema_kind = "protobuf"

    def __init__(
        self,
        spec: Mapping[str, Any],
        path: str,
        catalogs: CatalogSet,
        topic: str | None = None,
        role: str = "value",
    ) -> None:
        super().__init__(spec, path, catalogs, topic, role)
        self.record: str | None = None
        entry = next(iter(spec["catalog"].values()))[0]
        record = entry.get("record")
        if record is not None:
            where = f"{self.catalog_entry}.record"
            if not isinstance(record, str):
                raise ConfigError(where, f"{record!r} is not a message name")
            found = self.schemas.configured.find(record)
            if found is None:
                names = ", ".join(self.schemas.configured.by_name)
                raise ConfigError(where, f"the schema has no message '{record}' (it has {names})")
            self.record = found.name

    def compile(self, schema: Schema) -> ProtoSchema:
        return ProtoSchema(schema)

    def decode_payload(self, schema_id: int, schema: ProtoSchema, payload: bytes) -> Message:
        try:
            indexes, start = message_indexes(payload, HEADER_SIZE)
        except WireError as exc:
            raise InvalidMessage(f"bad message indexes: {exc}") from None
        kind = schema.by_indexes.get(indexes)
        if kind is None:
            raise InvalidMessage(
                f"message index {list(indexes)} names no message of schema id {schema_id}"
            )
        if self.record is not None and kind.name != self.record:
            raise InvalidMessage(
                f"message index {list(indexes)} is '{kind.name}', not the record '{self.record}'"
            )
        body = payload[start:]
        message = kind.new()
        try:
            message.ParseFromString(body)
        except DecodeError as exc:
            fault = explain(body, kind.descriptor, schema.utf8, HEADER_SIZE + start) or exc
            raise InvalidMessage(f"not a {kind.name} of schema id {schema_id}: {fault}") from None
        if kind.required and not message.IsInitialized():
            missing = ", ".join(cast(Any, message).FindInitializationErrors())
            raise InvalidMessage(f"{kind.name} of schema id {schema_id} lacks required {missing}")
        if _has_unknown_fields(message, kind.nested):
            again = kind.new()
            again.ParseFromString(body)
            unknown = _first_unknown(again) or "a field the schema does not declare"
            raise InvalidMessage(f"{kind.name} of schema id {schema_id}: {unknown}")
        if kind.any and self.view == "json":
            try:
                self.json_text(message)
            except Exception as exc:  # an Any whose packed type the schema does not know
                raise InvalidMessage(f"{kind.name} has no JSON form: {exc}") from None
        return message

    def json_text(self, value: Message) -> str:
        document = MessageToDict(
            value,
            preserving_proto_field_name=True,
            always_print_fields_with_no_presence=True,
            descriptor_pool=cast(DescriptorPool, value.DESCRIPTOR.file.pool),
        )
        return json.dumps(document, separators=(",", ":"), ensure_ascii=False)


def _message_paths(
    messages: Any, prefix: tuple[int, ...], scope: str
) -> Iterator[tuple[tuple[int, ...], str]]:
    """Every message of a file with its Confluent index path and its path in the file."""
    message: DescriptorProto
    for index, message in enumerate(messages):
        name = f"{scope}.{message.name}" if scope else message.name
        yield (*prefix, index), name
        yield from _message_paths(message.nested_type, (*prefix, index), name)


def _checks_utf8(file: FileDescriptorProto) -> bool:
    """Whether the file's ``string`` fields must hold UTF-8: proto3, and editions unless the
    file turns the check off (a field's own feature is not looked at)."""
    if file.syntax == "editions":
        return file.options.features.utf8_validation != FeatureSet.NONE
    return file.syntax == "proto3"


def _reaches(descriptor: Descriptor, test: Callable[[Descriptor], bool]) -> bool:
    """Whether ``test`` holds for this message or any message type its fields lead to."""
    seen: set[str] = set()
    todo = [descriptor]
    while todo:
        current = todo.pop()
        if current.full_name in seen:
            continue
        seen.add(current.full_name)
        if test(current):
            return True
        todo.extend(f.message_type for f in current.fields if f.message_type is not None)
    return False


def _has_unknown_fields(message: Message, nested: bool) -> bool:
    if not nested:
        return len(UnknownFieldSet(message)) > 0
    size = message.ByteSize()
    message.DiscardUnknownFields()
    return message.ByteSize() != size


def _first_unknown(message: Message) -> str | None:
    """Which field of ``message`` (or of a message inside it) the schema does not declare."""
    where = message.DESCRIPTOR
    unknowns = UnknownFieldSet(message)
    if len(unknowns):
        unknown = unknowns[0]
        number, wire = unknown.field_number, WIRE_TYPES.get(unknown.wire_type, "?")
        declared = where.fields_by_number.get(number)
        if declared is None:
            return f"field {number} ({wire}) is not in {where.full_name}"
        if declared.enum_type is not None and wire == "varint":
            return (
                f"field {number} '{declared.name}' of {where.full_name} holds a number enum"
                f" {declared.enum_type.name} does not define"
            )
        return f"field {number} '{declared.name}' of {where.full_name} came as {wire}"
    for field, value in message.ListFields():
        entry = field.message_type
        if entry is None:
            continue
        if entry.GetOptions().map_entry:
            holds_messages = entry.fields_by_name["value"].message_type is not None
            values = list(value.values()) if holds_messages else []
        else:
            values = list(value) if field.is_repeated else [value]
        for inner in values:
            found = _first_unknown(inner)
            if found is not None:
                return found
    return None

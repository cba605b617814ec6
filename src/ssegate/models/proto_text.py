"""``.proto`` text (proto3, and proto2) read into a ``FileDescriptorProto``, with no ``protoc``.

What it reads: ``syntax``, ``package``, ``import`` of files an ``imports`` callable hands over
(the protobuf model offers the ``google/protobuf`` well-known types), messages and nested
messages, enums (``allow_alias``), scalar and named field types, ``optional`` (proto3 presence
and proto2), ``required`` (proto2), ``repeated``, ``map<K, V>``, ``oneof``, ``reserved``,
``extensions``, and the field options ``default``, ``json_name``, ``packed`` and
``deprecated``. Other options are read and ignored, as are ``service`` and ``extend`` blocks.
Groups and editions are refused.

Type names are resolved here with protobuf's scoping rules (innermost scope first), so an
unknown type is reported where it is written. Every error is a
:class:`~ssegate.models.proto_lexer.ProtoSyntaxError` whose text starts ``line L, column C:``;
what only the descriptor pool checks (json name clashes, say) it reports without a position.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

from google.protobuf.descriptor_pb2 import (
    DescriptorProto,
    EnumDescriptorProto,
    FieldDescriptorProto,
    FileDescriptorProto,
)

from ssegate.models.proto_lexer import (
    END,
    IDENT,
    INT,
    STRING,
    ProtoSyntaxError,
    Token,
    TokenStream,
    parse_int,
)

Imports = Callable[[str], FileDescriptorProto | None]
Kind: TypeAlias = FieldDescriptorProto.Type.ValueType
"""The file an ``import "path";`` names, or ``None`` when it cannot be had."""

F = FieldDescriptorProto
SCALARS = {
    "double": F.TYPE_DOUBLE,
    "float": F.TYPE_FLOAT,
    "int64": F.TYPE_INT64,
    "uint64": F.TYPE_UINT64,
    "int32": F.TYPE_INT32,
    "fixed64": F.TYPE_FIXED64,
    "fixed32": F.TYPE_FIXED32,
    "bool": F.TYPE_BOOL,
    "string": F.TYPE_STRING,
    "bytes": F.TYPE_BYTES,
    "uint32": F.TYPE_UINT32,
    "sfixed32": F.TYPE_SFIXED32,
    "sfixed64": F.TYPE_SFIXED64,
    "sint32": F.TYPE_SINT32,
    "sint64": F.TYPE_SINT64,
}
MAP_KEYS = {name for name in SCALARS if name not in ("double", "float", "bytes")}
LABELS = {"optional": F.LABEL_OPTIONAL, "required": F.LABEL_REQUIRED, "repeated": F.LABEL_REPEATED}
MAX_FIELD_NUMBER = 536_870_911
MAX_ENUM_NUMBER = 2**31 - 1
IMPLEMENTATION_NUMBERS = range(19_000, 20_000)


def parse_proto(text: str, imports: Imports, name: str = "schema.proto") -> FileDescriptorProto:
    """The file ``text`` describes, named ``name``. Raises ProtoSyntaxError."""
    return _Parser(text, imports, name).parse()


class _Parser(TokenStream):
    """Definitions of one file, read top-down; field types are resolved at the end."""

    def __init__(self, text: str, imports: Imports, name: str) -> None:
        super().__init__(text)
        self.imports = imports
        self.file = FileDescriptorProto(name=name)
        self.proto3 = False
        self.types: dict[str, Kind] = {}
        """Full name (no leading dot) of every message and enum in reach → TYPE_MESSAGE/ENUM."""
        self.defined = False
        self.pending: list[tuple[FieldDescriptorProto, str, Token]] = []

    # -- file ------------------------------------------------------------------------------------

    def parse(self) -> FileDescriptorProto:
        first = self.peek()
        if first.text == "edition" and first.kind == IDENT:
            raise first.fail('editions are not supported: use syntax = "proto3" or "proto2"')
        if first.text == "syntax" and first.kind == IDENT:
            self.next()
            self.expect("=")
            value = self.next()
            if value.kind != STRING or value.text not in ("proto2", "proto3"):
                raise value.fail(f'syntax must be "proto3" or "proto2", not {value.describe()}')
            self.expect(";")
            self.proto3 = value.text == "proto3"
            self.file.syntax = value.text
        while self.peek().kind != END:
            token = self.next()
            word = token.text if token.kind == IDENT else None
            if word == "import":
                self.import_file()
            elif word == "package":
                self.package(token)
            elif word == "option":
                self.option()
            elif word == "message":
                self.message(self.file.message_type.add(), self.file.package)
            elif word == "enum":
                self.enum(self.file.enum_type.add(), self.file.package)
            elif word in ("service", "extend"):
                self.skip_block()
            elif token.text != ";" or token.kind == STRING:
                raise token.fail(f"expected a message, enum or option, found {token.describe()}")
        self.resolve()
        return self.file

    def import_file(self) -> None:
        if self.peek().text in ("public", "weak") and self.peek().kind == IDENT:
            self.next()
        path = self.next()
        if path.kind != STRING:
            raise path.fail(f"expected the path of the file to import, found {path.describe()}")
        self.expect(";")
        imported = self.imports(path.text)
        if imported is None:
            raise path.fail(
                f"cannot import {path.text!r}: only the google/protobuf well-known types can be"
                " imported"
            )
        self.file.dependency.append(path.text)
        scope = imported.package
        for message in imported.message_type:
            self.known_message(message, scope)
        for enum in imported.enum_type:
            self.types[_join(scope, enum.name)] = F.TYPE_ENUM

    def known_message(self, message: DescriptorProto, scope: str) -> None:
        full = _join(scope, message.name)
        self.types[full] = F.TYPE_MESSAGE
        for nested in message.nested_type:
            self.known_message(nested, full)
        for enum in message.enum_type:
            self.types[_join(full, enum.name)] = F.TYPE_ENUM

    def package(self, keyword: Token) -> None:
        name = self.next()
        if name.kind != IDENT or name.text.startswith("."):
            raise name.fail(f"expected a package name, found {name.describe()}")
        if self.file.package:
            raise keyword.fail("the package is already given")
        if self.defined:
            raise keyword.fail("the package must come before the first message or enum")
        self.file.package = name.text
        self.expect(";")

    def define(self, name: Token, scope: str, kind: Kind) -> str:
        full = _join(scope, name.text)
        if full in self.types:
            raise name.fail(f"'{full}' is already defined")
        self.types[full] = kind
        self.defined = True
        return full

    # -- messages --------------------------------------------------------------------------------

    def message(self, proto: DescriptorProto, scope: str) -> None:
        name = self.name("a message name")
        proto.name = name.text
        full = self.define(name, scope, F.TYPE_MESSAGE)
        self.expect("{")
        numbers: dict[int, str] = {}
        presence: list[FieldDescriptorProto] = []
        while not self.accept("}"):
            token = self.peek()
            word = token.text if token.kind == IDENT else None
            if word in ("message", "enum", "oneof", "option", "reserved", "extensions", "extend"):
                self.next()
            if word == "message":
                self.message(proto.nested_type.add(), full)
            elif word == "enum":
                self.enum(proto.enum_type.add(), full)
            elif word == "oneof":
                self.oneof(proto, full, numbers, presence)
            elif word == "option":
                self.option()
            elif word == "reserved":
                self.ranges(proto.reserved_range, proto.reserved_name, MAX_FIELD_NUMBER, 1)
            elif word == "extensions":
                self.ranges(proto.extension_range, None, MAX_FIELD_NUMBER, 1)
            elif word == "extend":
                self.skip_block()
            elif token.text == ";" and token.kind != STRING:
                self.next()
            elif token.kind == END:
                raise token.fail(f"expected '}}' to close message '{proto.name}'")
            else:
                self.field(proto, full, numbers, presence, None)
        for field in presence:
            field.oneof_index = len(proto.oneof_decl)
            proto.oneof_decl.add(name=f"_{field.name}")

    def oneof(
        self,
        proto: DescriptorProto,
        scope: str,
        numbers: dict[int, str],
        presence: list[FieldDescriptorProto],
    ) -> None:
        name = self.name("a oneof name")
        index = len(proto.oneof_decl)
        proto.oneof_decl.add(name=name.text)
        self.expect("{")
        while not self.accept("}"):
            token = self.peek()
            if token.text == "option" and token.kind == IDENT:
                self.next()
                self.option()
            elif token.text == ";" and token.kind != STRING:
                self.next()
            elif token.kind == END:
                raise token.fail(f"expected '}}' to close oneof '{name.text}'")
            else:
                self.field(proto, scope, numbers, presence, index)

    def field(
        self,
        proto: DescriptorProto,
        scope: str,
        numbers: dict[int, str],
        presence: list[FieldDescriptorProto],
        oneof: int | None,
    ) -> None:
        start = self.peek()
        label = LABELS.get(start.text) if start.kind == IDENT else None
        if label is not None:
            if oneof is not None:
                raise start.fail(f"a field in a oneof cannot be '{start.text}'")
            if label == F.LABEL_REQUIRED and self.proto3:
                raise start.fail("required fields are not allowed in proto3")
            self.next()
        kind = self.next()
        if kind.text == "map" and self.peek().text == "<":
            if label is not None or oneof is not None:
                raise kind.fail("a map field cannot be repeated, optional, required or in a oneof")
            self.map_field(proto, scope, numbers)
            return
        if kind.text == "group":
            raise kind.fail("groups are not supported: use a nested message")
        if kind.kind != IDENT:
            raise kind.fail(f"expected a field type, found {kind.describe()}")
        name = self.name("a field name")
        field = proto.field.add(name=name.text, label=label or F.LABEL_OPTIONAL)
        field.number = self.field_number(name, numbers)
        if self.proto3 and label == F.LABEL_OPTIONAL:
            field.proto3_optional = True
            presence.append(field)
        if oneof is not None:
            field.oneof_index = oneof
        self.set_type(field, kind, scope)
        if self.accept("["):
            self.field_options(field)
        self.expect(";")

    def map_field(self, proto: DescriptorProto, scope: str, numbers: dict[int, str]) -> None:
        self.expect("<")
        key = self.next()
        if key.text not in MAP_KEYS or key.kind != IDENT:
            raise key.fail(f"a map key must be an integer type, bool or string, not {key.text!r}")
        self.expect(",")
        value = self.next()
        if value.kind != IDENT:
            raise value.fail(f"expected the map's value type, found {value.describe()}")
        self.expect(">")
        name = self.name("a field name")
        number = self.field_number(name, numbers)
        entry = proto.nested_type.add(name=_map_entry_name(name.text))
        entry.options.map_entry = True
        entry_name = self.define(
            Token(IDENT, entry.name, name.line, name.column), scope, F.TYPE_MESSAGE
        )
        entry.field.add(name="key", number=1, label=F.LABEL_OPTIONAL, type=SCALARS[key.text])
        self.set_type(entry.field.add(name="value", number=2, label=F.LABEL_OPTIONAL), value, scope)
        field = proto.field.add(name=name.text, number=number, label=F.LABEL_REPEATED)
        field.type, field.type_name = F.TYPE_MESSAGE, f".{entry_name}"
        if self.accept("["):
            self.field_options(field)
        self.expect(";")

    def field_number(self, name: Token, numbers: dict[int, str]) -> int:
        self.expect("=")
        token = self.peek()
        number = self.integer("a field number")
        if not 1 <= number <= MAX_FIELD_NUMBER:
            raise token.fail(f"field number {number} is outside 1 to {MAX_FIELD_NUMBER}")
        if number in IMPLEMENTATION_NUMBERS:
            raise token.fail(f"field numbers 19000 to 19999 are reserved, {number} cannot be used")
        if number in numbers:
            raise token.fail(f"field number {number} is already used by '{numbers[number]}'")
        numbers[number] = name.text
        return number

    def set_type(self, field: FieldDescriptorProto, kind: Token, scope: str) -> None:
        scalar = SCALARS.get(kind.text)
        if scalar is not None:
            field.type = scalar
        else:
            self.pending.append((field, scope, kind))

    def field_options(self, field: FieldDescriptorProto) -> None:
        while True:
            key = self.option_name()
            self.expect("=")
            value = self.option_value()
            if key == "default":
                self.set_default(field, value)
            elif key == "json_name" and value is not None and value.kind == STRING:
                field.json_name = value.text
            elif key in ("packed", "deprecated") and value is not None:
                setattr(field.options, key, value.text == "true")
            if self.accept("]"):
                return
            self.expect(",")

    def set_default(self, field: FieldDescriptorProto, value: Token | None) -> None:
        where = value or self.peek()
        if self.proto3:
            raise where.fail("default values are not allowed in proto3")
        if value is None or field.label == F.LABEL_REPEATED:
            raise where.fail(f"field '{field.name}' cannot have this default")
        if field.type == F.TYPE_BYTES and value.kind == STRING:
            field.default_value = _c_escape(value.text)
        elif value.kind == INT or value.text.lstrip("-").startswith(("0x", "0X")):
            sign = "-" if value.text.startswith("-") else ""
            field.default_value = sign + str(parse_int(value.text.lstrip("-")))
        else:
            field.default_value = value.text

    # -- enums -----------------------------------------------------------------------------------

    def enum(self, proto: EnumDescriptorProto, scope: str) -> None:
        name = self.name("an enum name")
        proto.name = name.text
        self.define(name, scope, F.TYPE_ENUM)
        self.expect("{")
        while not self.accept("}"):
            token = self.next()
            if token.kind == END:
                raise token.fail(f"expected '}}' to close enum '{proto.name}'")
            if token.text == "option" and token.kind == IDENT:
                key, value = self.option()
                if key == "allow_alias" and value is not None:
                    proto.options.allow_alias = value.text == "true"
            elif token.text == "reserved" and token.kind == IDENT:
                self.ranges(proto.reserved_range, proto.reserved_name, MAX_ENUM_NUMBER, 0)
            elif token.kind == IDENT and "." not in token.text:
                self.expect("=")
                at = self.peek()
                number = self.integer("an enum value number")
                if not -MAX_ENUM_NUMBER - 1 <= number <= MAX_ENUM_NUMBER:
                    raise at.fail(f"enum value {number} does not fit in 32 bits")
                if self.proto3 and not proto.value and number != 0:
                    raise at.fail(f"the first value of proto3 enum '{proto.name}' must be 0")
                proto.value.add(name=token.text, number=number)
                if self.accept("["):
                    self.skip_to("]")
                self.expect(";")
            elif token.text != ";" or token.kind == STRING:
                raise token.fail(f"expected an enum value, found {token.describe()}")
        if not proto.value:
            raise name.fail(f"enum '{proto.name}' has no values")

    # -- type names ------------------------------------------------------------------------------

    def resolve(self) -> None:
        for field, scope, token in self.pending:
            full = self.lookup(token.text, scope)
            if full is None:
                raise token.fail(f"unknown type '{token.text}'")
            field.type = self.types[full]
            field.type_name = f".{full}"

    def lookup(self, name: str, scope: str) -> str | None:
        if name.startswith("."):
            return name[1:] if name[1:] in self.types else None
        while True:
            candidate = _join(scope, name)
            if candidate in self.types:
                return candidate
            if not scope:
                return None
            scope = scope.rpartition(".")[0]


def _join(scope: str, name: str) -> str:
    return f"{scope}.{name}" if scope else name


def _map_entry_name(field: str) -> str:
    """``protoc``'s name for a map field's entry message: ``item_counts`` → ``ItemCountsEntry``."""
    parts = field.split("_")
    return "".join(p[:1].upper() + p[1:] for p in parts) + "Entry"


def _c_escape(text: str) -> str:
    """A bytes default as ``FileDescriptorProto.default_value`` wants it (C escapes)."""
    return "".join(
        c if 0x20 <= ord(c) < 0x7F and c not in "\\'\"" else f"\\{ord(c) & 0xFF:03o}" for c in text
    )


__all__ = ["Imports", "ProtoSyntaxError", "parse_proto"]

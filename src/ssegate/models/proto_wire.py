"""The protobuf wire format, read by hand where the protobuf runtime is not precise enough.

:func:`message_indexes` reads the Confluent message-index list that follows the schema id: a
zigzag varint count, then that many zigzag varint indexes (the first picks a top-level message
of the schema in declaration order, each next one a nested message of the one before). A count
of ``0`` (the single byte ``0``) means ``[0]``, the first message.

:func:`explain` walks a payload the runtime refused and says what is wrong and where (byte
offsets count from the start of the whole Kafka value): a truncated tag, varint or
length-delimited field, a wire type that does not exist (6, 7), field number 0, an unbalanced
group, a packed repeated field that does not divide into its values, or (proto3) a ``string``
that is not UTF-8. It descends into the fields the descriptor declares as messages.
"""

from __future__ import annotations

from google.protobuf.descriptor import Descriptor, FieldDescriptor

FIRST_MESSAGE = (0,)
MAX_DEPTH = 100
"""How deep messages may nest, as the protobuf runtimes allow by default."""
FIXED_SIZES = {1: 8, 5: 4}
WIRE_TYPES = {0: "varint", 1: "64-bit", 2: "length-delimited", 3: "group", 4: "group", 5: "32-bit"}
_F = FieldDescriptor
PACKED_FIXED_SIZES = {
    **dict.fromkeys((_F.TYPE_DOUBLE, _F.TYPE_FIXED64, _F.TYPE_SFIXED64), 8),
    **dict.fromkeys((_F.TYPE_FLOAT, _F.TYPE_FIXED32, _F.TYPE_SFIXED32), 4),
}
PACKED_VARINTS = {
    _F.TYPE_INT32,
    _F.TYPE_INT64,
    _F.TYPE_UINT32,
    _F.TYPE_UINT64,
    _F.TYPE_SINT32,
    _F.TYPE_SINT64,
    _F.TYPE_BOOL,
    _F.TYPE_ENUM,
}


class WireError(ValueError):
    """Bytes that do not follow the wire format."""


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it. Raises WireError."""
    result = shift = 0
    while True:
        if pos >= len(data):
            raise WireError("cut short")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise WireError("longer than 10 bytes")


def zigzag(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def message_indexes(payload: bytes, offset: int = 0) -> tuple[tuple[int, ...], int]:
    """The message indexes at the start of ``payload`` and where the message starts.
    ``offset``: where ``payload`` starts, for the byte positions in errors. Raises WireError."""
    if payload[:1] == b"\x00":
        return FIRST_MESSAGE, 1
    pos = 0
    values: list[int] = []
    while pos < len(payload) and (not values or len(values) <= values[0]):
        try:
            raw, after = read_varint(payload, pos)
        except WireError as exc:
            raise WireError(f"the varint at byte {offset + pos} is {exc}") from None
        value = zigzag(raw)
        if value < 0:
            what = "count" if not values else "index"
            raise WireError(f"message {what} {value} at byte {offset + pos} is negative")
        values.append(value)
        pos = after
    if not values or len(values) <= values[0]:
        raise WireError(f"the message-index list is cut short at byte {offset + pos}")
    return tuple(values[1:]) or FIRST_MESSAGE, pos


def explain(
    data: bytes, message: Descriptor, utf8: bool, offset: int = 0, depth: int = 0
) -> str | None:
    """The first wire-level fault in ``data`` read as ``message``, or ``None`` when there is
    none. ``utf8``: strings must be UTF-8 (proto3); ``offset``: where ``data`` starts."""
    if depth > MAX_DEPTH:
        return f"messages nest deeper than {MAX_DEPTH} at byte {offset}"
    pos, end = 0, len(data)
    groups: list[int] = []
    while pos < end:
        at = offset + pos
        try:
            tag, pos = read_varint(data, pos)
        except WireError:
            return f"truncated field tag at byte {at}"
        number, wire = tag >> 3, tag & 7
        if number == 0:
            return f"field number 0 at byte {at}"
        if wire not in WIRE_TYPES:
            return f"field {number} at byte {at} has wire type {wire}, which does not exist"
        if wire == 0:
            try:
                _, pos = read_varint(data, pos)
            except WireError:
                return f"field {number} at byte {at}: its varint is cut short or too long"
        elif wire in FIXED_SIZES:
            pos += FIXED_SIZES[wire]
            if pos > end:
                return f"field {number} at byte {at}: its {WIRE_TYPES[wire]} value is cut short"
        elif wire == 2:
            try:
                length, pos = read_varint(data, pos)
            except WireError:
                return f"field {number} at byte {at}: its length is cut short"
            if pos + length > end:
                return (
                    f"field {number} at byte {at}: length {length} runs past the end"
                    f" ({end - pos} bytes left)"
                )
            value = data[pos : pos + length]
            inner = _explain_field(message, number, value, utf8, offset + pos, depth)
            if inner is not None:
                return inner
            pos += length
        elif wire == 3:
            groups.append(number)
        elif not groups or groups.pop() != number:
            return f"field {number} at byte {at} ends a group that was not started"
    if groups:
        return f"group field {groups[-1]} is not closed"
    return None


def _explain_field(
    message: Descriptor, number: int, value: bytes, utf8: bool, offset: int, depth: int
) -> str | None:
    field = message.fields_by_number.get(number)
    if field is None:
        return None
    if field.message_type is not None:
        inner = explain(value, field.message_type, utf8, offset, depth + 1)
        return None if inner is None else f"in field '{field.name}': {inner}"
    if field.type == FieldDescriptor.TYPE_STRING and utf8:
        try:
            value.decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"field '{field.name}' at byte {offset + exc.start} is not UTF-8"
    if not field.is_repeated:
        return None
    size = PACKED_FIXED_SIZES.get(field.type)
    if size is not None and len(value) % size:
        return (
            f"packed field '{field.name}' at byte {offset}: {len(value)} bytes are not whole"
            f" {size}-byte values"
        )
    if field.type in PACKED_VARINTS:
        pos = 0
        while pos < len(value):
            try:
                _, pos = read_varint(value, pos)
            except WireError as exc:
                return f"packed field '{field.name}': the varint at byte {offset + pos} is {exc}"
    return None

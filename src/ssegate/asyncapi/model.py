"""An AsyncAPI document reduced to what a gateway runs: servers, channels, operations, security.

:func:`read_api` takes a schema-valid 3.0.0 or 2.6.0 document (see
:mod:`ssegate.asyncapi.document`) and returns an :class:`Api`, the same shape for both
versions, every part remembering the JSON pointer it came from. The checks the official
schema cannot make are made here and refused with that pointer: a parameter declared and not
used in the address, a payload in a schema format other than JSON Schema or Avro, a server
``host`` with a bad port. A ``{parameter}`` used in an address and not declared is read as
Zilla reads it, one path segment (its examples write ``/events/{id}`` with no
``parameters``), and listed in :attr:`Api.notes`, the differences from the AsyncAPI
specification that the document relies on. Each message keeps its payload
schema and its Kafka key schema (``bindings.kafka.key``) with their format and pointer; what
may use which format is decided where they are used (an SSE channel takes JSON Schema only).

2.6.0 is read from the client's point of view as that version defines it: a channel's
``subscribe`` operation is what the application sends (an SSE stream), ``publish`` what it
receives. In 3.0.0 the operation's ``action`` says it directly (``send``/``receive``); which
actions an SSE or Kafka document may use is decided by :mod:`~ssegate.asyncapi.roles`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from ssegate.asyncapi.document import AsyncApiError, dangling_refs, pointer, resolve_ref

PARAMETER = re.compile(r"\{([^{}/]+)\}")
JSON_SCHEMA_FORMATS = (
    "",
    "application/schema+json;version=draft-07",
    "application/schema+yaml;version=draft-07",
)
AVRO_FORMAT = "application/vnd.apache.avro"
"""The prefix of Avro schema formats (``...avro;version=1.9.0``, ``...avro+json;...``)."""
AVRO_ONLY_TYPES = frozenset(
    {"record", "enum", "fixed", "map", "int", "long", "float", "double", "bytes"}
)
"""Avro ``type`` names that no JSON Schema uses: a key schema with one of them is Avro."""


@dataclass(frozen=True, slots=True)
class ApiServer:
    name: str
    protocol: str
    host: str
    port: int | None
    pathname: str
    security: tuple[SecurityUse, ...]
    where: str


@dataclass(frozen=True, slots=True)
class MessageSchema:
    """The schema of one part of a message (its payload or its Kafka key), ``$ref`` inlined."""

    schema: Any
    format: str
    """``json`` (JSON Schema, or the AsyncAPI schema object) or ``avro``."""
    where: str
    """The JSON pointer of the schema in the document."""


@dataclass(frozen=True, slots=True)
class ApiMessage:
    name: str
    payload: MessageSchema | None
    """``None`` when the message gives no payload schema."""
    key: MessageSchema | None = None
    """The Kafka message binding's ``key`` schema, or ``None``."""


@dataclass(frozen=True, slots=True)
class ApiChannel:
    name: str
    address: str
    parameters: tuple[str, ...]
    messages: tuple[ApiMessage, ...]
    where: str
    address_at: str
    """The pointer of the address (``/channels/x/address``; in 2.6 the channel's own key)."""
    undeclared: tuple[str, ...] = ()
    """Parameters of the address with no entry under ``parameters`` (read as Zilla does)."""


@dataclass(frozen=True, slots=True)
class SecurityUse:
    """A security scheme an operation or server requires, with the roles (scopes) it needs."""

    scheme: str
    type: str
    http_scheme: str
    roles: tuple[str, ...]
    where: str


@dataclass(frozen=True, slots=True)
class ApiOperation:
    name: str
    action: str
    """``send`` (the application sends: an SSE stream, a Kafka topic read) or ``receive``."""
    channel: ApiChannel
    security: tuple[SecurityUse, ...]
    where: str


@dataclass(frozen=True, slots=True)
class Api:
    version: str
    title: str
    servers: tuple[ApiServer, ...]
    channels: dict[str, ApiChannel]
    operations: dict[str, ApiOperation] = field(default_factory=dict)
    dangling: tuple[str, ...] = ()
    """``$ref`` s that point at nothing in parts nothing follows (:func:`dangling_refs`)."""

    @property
    def notes(self) -> list[str]:
        """``<pointer>: <what>`` for each place the document departs from the AsyncAPI
        specification in a way Zilla runs, and ssegate with it."""
        undeclared = [
            f"{c.address_at}: parameter {{{p}}} is not declared in {c.where}/parameters;"
            " read as one path segment, as Zilla does"
            for c in self.channels.values()
            for p in c.undeclared
        ]
        unread = [f"{d}; nothing reads it, as in Zilla: correct it" for d in self.dangling]
        return undeclared + unread


def read_api(document: Mapping[str, Any]) -> Api:
    """The :class:`Api` of a schema-valid document. Raises :class:`AsyncApiError`."""
    if str(document.get("asyncapi")).startswith("2."):
        api = _read_v2(document)
    else:
        api = _read_v3(document)
    return replace(api, dangling=tuple(dangling_refs(document)))


# -- 3.0.0 ----------------------------------------------------------------------------------


def _read_v3(document: Mapping[str, Any]) -> Api:
    servers = tuple(
        _server_v3(document, name, raw) for name, raw in (document.get("servers") or {}).items()
    )
    channels: dict[str, ApiChannel] = {}
    for name, raw in (document.get("channels") or {}).items():
        where = pointer(["channels", name])
        value, at = resolve_ref(document, raw, where)
        address = value.get("address")
        if address is None:
            raise AsyncApiError(
                f"{at}/address", "an SSE channel needs an address (the request path)"
            )
        messages = _messages(document, value.get("messages") or {}, f"{at}/messages")
        channels[name] = _channel(
            name, address, value.get("parameters") or {}, messages, at, f"{at}/address"
        )
    by_pointer = {c.where: c for c in channels.values()}
    operations: dict[str, ApiOperation] = {}
    for name, raw in (document.get("operations") or {}).items():
        where = pointer(["operations", name])
        value, at = resolve_ref(document, raw, where)
        _, channel_at = resolve_ref(document, value["channel"], f"{at}/channel")
        channel = by_pointer.get(channel_at)
        if channel is None:
            raise AsyncApiError(f"{at}/channel", "must refer to an entry of /channels")
        security = _security_v3(document, value.get("security") or [], f"{at}/security")
        extra = tuple(str(r) for r in value.get("x-ssegate-roles") or [])
        security = tuple(replace(u, roles=u.roles + extra) for u in security)
        operations[name] = ApiOperation(name, value["action"], channel, security, at)
    info = document.get("info") or {}
    return Api("3.0.0", str(info.get("title", "")), servers, channels, operations)


def _server_v3(document: Mapping[str, Any], name: str, raw: Any) -> ApiServer:
    value, at = resolve_ref(document, raw, pointer(["servers", name]))
    host, port = _host_port(_substitute(value["host"], value), f"{at}/host")
    pathname = _substitute(value.get("pathname") or "", value)
    security = _security_v3(document, value.get("security") or [], f"{at}/security")
    return ApiServer(name, value["protocol"], host, port, pathname.rstrip("/"), security, at)


def _security_v3(
    document: Mapping[str, Any], entries: list[Any], where: str
) -> tuple[SecurityUse, ...]:
    uses = []
    for index, raw in enumerate(entries):
        scheme, at = resolve_ref(document, raw, f"{where}/{index}")
        name = at.rsplit("/", 1)[-1] if at.startswith("/components/securitySchemes/") else ""
        roles = tuple(str(s) for s in scheme.get("scopes") or [])
        uses.append(
            SecurityUse(
                name or f"security{index}",
                str(scheme.get("type", "")),
                str(scheme.get("scheme", "")).lower(),
                roles,
                at,
            )
        )
    return tuple(uses)


# -- 2.6.0 ----------------------------------------------------------------------------------


def _read_v2(document: Mapping[str, Any]) -> Api:
    servers = []
    for name, raw in (document.get("servers") or {}).items():
        value, at = resolve_ref(document, raw, pointer(["servers", name]))
        url = _substitute(value["url"], value)
        parts = urlsplit(url if "://" in url else f"//{url}")
        host, port = _host_port(parts.netloc, f"{at}/url")
        security = _security_v2(document, value.get("security") or [], f"{at}/security")
        servers.append(
            ApiServer(name, value["protocol"], host, port, parts.path.rstrip("/"), security, at)
        )
    channels: dict[str, ApiChannel] = {}
    operations: dict[str, ApiOperation] = {}
    for address, raw in (document.get("channels") or {}).items():
        at = pointer(["channels", address])
        value, at = resolve_ref(document, raw, at)
        messages: list[ApiMessage] = []
        for verb in ("subscribe", "publish"):
            if verb in value:
                messages.extend(_v2_messages(document, value[verb], f"{at}/{verb}"))
        name = _channel_name(address)
        channel = _channel(name, address, value.get("parameters") or {}, tuple(messages), at, at)
        channels[name] = channel
        for verb, action in (("subscribe", "send"), ("publish", "receive")):
            if verb not in value:
                continue
            operation = value[verb]
            op_name = str(operation.get("operationId") or f"{verb}_{name}")
            security = _security_v2(
                document, operation.get("security") or [], f"{at}/{verb}/security"
            )
            operations[op_name] = ApiOperation(op_name, action, channel, security, f"{at}/{verb}")
    info = document.get("info") or {}
    return Api("2.6.0", str(info.get("title", "")), tuple(servers), channels, operations)


def _v2_messages(document: Mapping[str, Any], operation: Any, where: str) -> list[ApiMessage]:
    raw = operation.get("message")
    if raw is None:
        return []
    value, at = resolve_ref(document, raw, f"{where}/message")
    alternatives = value.get("oneOf")
    if alternatives is None:
        return [_message(document, str(value.get("name") or "message"), value, at)]
    found = []
    for index, item in enumerate(alternatives):
        message, item_at = resolve_ref(document, item, f"{at}/oneOf/{index}")
        found.append(
            _message(document, str(message.get("name") or f"message{index}"), message, item_at)
        )
    return found


def _security_v2(
    document: Mapping[str, Any], requirements: list[Any], where: str
) -> tuple[SecurityUse, ...]:
    schemes = (document.get("components") or {}).get("securitySchemes") or {}
    uses = []
    for index, requirement in enumerate(requirements):
        for name, scopes in requirement.items():
            if name not in schemes:
                raise AsyncApiError(
                    f"{where}/{index}/{name}", f"security scheme {name!r} is not defined"
                )
            scheme, at = resolve_ref(
                document, schemes[name], pointer(["components", "securitySchemes", name])
            )
            uses.append(
                SecurityUse(
                    name,
                    str(scheme.get("type", "")),
                    str(scheme.get("scheme", "")).lower(),
                    tuple(str(s) for s in scopes or []),
                    at,
                )
            )
    return tuple(uses)


# -- shared ----------------------------------------------------------------------------------


def _channel(
    name: str,
    address: str,
    declared: Mapping[str, Any],
    messages: tuple[ApiMessage, ...] | list[ApiMessage],
    where: str,
    address_at: str,
) -> ApiChannel:
    used = PARAMETER.findall(address)
    undeclared = tuple(p for p in used if p not in declared)
    for parameter in declared:
        if parameter not in used:
            raise AsyncApiError(
                f"{where}/parameters/{parameter}",
                f"parameter {parameter!r} does not appear in the address {address!r}",
            )
    if len(set(used)) != len(used):
        raise AsyncApiError(address_at, f"{address!r} names a parameter twice")
    return ApiChannel(name, address, tuple(used), tuple(messages), where, address_at, undeclared)


def _messages(
    document: Mapping[str, Any], raw: Mapping[str, Any], where: str
) -> tuple[ApiMessage, ...]:
    found = []
    for name, item in raw.items():
        value, at = resolve_ref(document, item, f"{where}/{name}")
        found.append(_message(document, str(name), value, at))
    return tuple(found)


def _message(
    document: Mapping[str, Any], name: str, value: Mapping[str, Any], where: str
) -> ApiMessage:
    payload = value.get("payload")
    schema_format = str(value.get("schemaFormat") or "")  # 2.6: on the message
    return ApiMessage(
        name,
        None if payload is None else _schema(document, payload, schema_format, f"{where}/payload"),
        _kafka_key(document, value, where),
    )


def _kafka_key(
    document: Mapping[str, Any], message: Mapping[str, Any], where: str
) -> MessageSchema | None:
    bindings, at = resolve_ref(document, message.get("bindings") or {}, f"{where}/bindings")
    kafka, at = resolve_ref(document, bindings.get("kafka") or {}, f"{at}/kafka")
    if kafka.get("key") is None:
        return None
    key = _schema(document, kafka["key"], "", f"{at}/key")
    schema = key.schema
    if key.format == "json" and (
        isinstance(schema, str | list)  # an Avro primitive name or union
        or (isinstance(schema, Mapping) and schema.get("type") in AVRO_ONLY_TYPES)
    ):
        return replace(key, format="avro")
    return key


def _schema(document: Mapping[str, Any], raw: Any, schema_format: str, where: str) -> MessageSchema:
    if isinstance(raw, Mapping) and "schemaFormat" in raw and "schema" in raw:  # 3.0 multi-format
        schema_format, raw, where = str(raw["schemaFormat"]), raw["schema"], f"{where}/schema"
    if schema_format.startswith(AVRO_FORMAT):
        kind = "avro"
    elif schema_format in JSON_SCHEMA_FORMATS or schema_format.startswith(
        "application/vnd.aai.asyncapi"
    ):
        kind = "json"
    else:
        raise AsyncApiError(
            where,
            f"schema format {schema_format!r} is not supported (JSON Schema; Avro on a Kafka"
            " channel)",
        )
    return MessageSchema(inline_refs(document, raw, where), kind, where)


def inline_refs(document: Mapping[str, Any], value: Any, where: str, depth: int = 0) -> Any:
    """``value`` with every local ``$ref`` replaced by what it points at."""
    if depth > 32:
        raise AsyncApiError(where, "schema references nest deeper than 32 (a cycle?)")
    if isinstance(value, Mapping):
        if "$ref" in value:
            target, at = resolve_ref(document, value, where)
            return inline_refs(document, target, at, depth + 1)
        return {k: inline_refs(document, v, f"{where}/{k}", depth) for k, v in value.items()}
    if isinstance(value, list):
        return [inline_refs(document, v, f"{where}/{i}", depth) for i, v in enumerate(value)]
    return value


def _substitute(text: str, server: Mapping[str, Any]) -> str:
    """Server variables replaced by their ``default``."""
    variables = server.get("variables") or {}

    def value(match: re.Match[str]) -> str:
        variable = variables.get(match.group(1)) or {}
        return str(variable.get("default", match.group(0)))

    return PARAMETER.sub(value, str(text))


def _host_port(text: str, where: str) -> tuple[str, int | None]:
    host, sep, port = text.rpartition(":")
    if not sep or "]" in port:
        return text, None
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise AsyncApiError(where, f"{text!r}: the port must be a number from 1 to 65535")
    return host.strip("[]"), int(port)


def _channel_name(address: str) -> str:
    name = re.sub(r"[^\w.\-]+", "_", address.replace("{", "").replace("}", "")).strip("_")
    return name or "root"

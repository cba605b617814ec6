"""A config's SSE endpoints written as an AsyncAPI 3.0.0 document.

:func:`export_document` walks the resolved config from its ``tcp`` servers inwards:

- every listener that reaches an ``http`` server (through ``tls`` or not) is a server,
  ``host:port`` with protocol ``https`` or ``http``;
- every http route to an ``sse`` server is followed through the sse server's routes: an
  ``sse-kafka`` proxy contributes one channel per route (its ``when.path``, ``{params}``
  kept); any other exit (the upstream ``sse`` client) one channel whose address is the http
  route's ``:path`` pattern (else the sse route's path, ``*`` becoming ``{p1}``...);
- each channel gets one ``send`` operation (the gateway sends, clients receive) and one
  message, with a payload when the sse server's ``requests`` validate that path with a
  ``json`` model whose schema a local catalog holds;
- a route ``guarded`` by a guard becomes an http ``bearer`` security scheme named after the
  guard; its roles travel in the operation's ``x-ssegate-roles``.

The result validates against the official AsyncAPI 3.0.0 schema (tests check it).
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterator
from typing import Any

from ssegate.asyncapi.model import PARAMETER
from ssegate.config.model import Binding, Config, Route

MESSAGE = "event"


def export_document(config: Config) -> dict[str, Any]:
    """The AsyncAPI 3.0.0 document of ``config``'s SSE endpoints."""
    servers: dict[str, Any] = {}
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    schemes: dict[str, Any] = {}
    addresses: dict[str, str] = {}
    for http, protocol, host, port in _listeners(config):
        servers[_unique(f"{protocol}_{port}", servers)] = {
            "host": f"{host}:{port}",
            "protocol": protocol,
            "description": f"binding {http.name}",
        }
    for http in _reached_http_servers(config):
        for address, sse, route in _sse_channels(config, http):
            if address in addresses:
                continue
            name = _unique(_channel_name(address), channels)
            addresses[address] = name
            channel: dict[str, Any] = {"address": address, "messages": {}}
            parameters = PARAMETER.findall(address)
            if parameters:
                channel["parameters"] = {
                    p: {"description": f"path segment {{{p}}}"} for p in parameters
                }
            message: dict[str, Any] = {"name": MESSAGE}
            payload = _payload(config, sse, address)
            if payload is not None:
                message["contentType"] = "application/json"
                message["payload"] = payload
            channel["messages"][MESSAGE] = message
            channels[name] = channel
            operation: dict[str, Any] = {
                "action": "send",
                "channel": {"$ref": f"#/channels/{name}"},
                "messages": [{"$ref": f"#/channels/{name}/messages/{MESSAGE}"}],
            }
            for guard, roles in route.guarded.items():
                schemes[guard] = {
                    "type": "http",
                    "scheme": "bearer",
                    "bearerFormat": "JWT",
                    "description": f"checked by guard {guard}",
                }
                operation.setdefault("security", []).append(
                    {"$ref": f"#/components/securitySchemes/{guard}"}
                )
                if roles:
                    operation["x-ssegate-roles"] = list(roles)
            operations[f"send_{name}"] = operation
    document: dict[str, Any] = {
        "asyncapi": "3.0.0",
        "info": {
            "title": config.name,
            "version": "1.0.0",
            "description": f"The SSE endpoints of the ssegate config '{config.name}'.",
        },
    }
    if servers:
        document["servers"] = servers
    document["channels"] = channels
    document["operations"] = operations
    if schemes:
        document["components"] = {"securitySchemes": schemes}
    return document


def export_json(config: Config) -> str:
    return json.dumps(export_document(config), indent=2) + "\n"


def _listeners(config: Config) -> Iterator[tuple[Binding, str, str, int]]:
    for tcp in config.bindings.values():
        if (tcp.type, tcp.kind) != ("tcp", "server"):
            continue
        host = str(tcp.options.get("host", "0.0.0.0"))
        for port in _ports(tcp.options.get("port")):
            target = _exit_for_port(config, tcp, port)
            secure = target is not None and target.type == "tls"
            if secure and target is not None:
                target = config.bindings.get(target.exit or next(iter(target.exits()), ""))
            if target is not None and (target.type, target.kind) == ("http", "server"):
                yield target, "https" if secure else "http", host, port


def _ports(value: Any) -> list[int]:
    values = value if isinstance(value, list) else [value]
    ports = []
    for item in values:
        text = str(item)
        if re.fullmatch(r"\d+(-\d+)?", text):
            ports.append(int(text.split("-", 1)[0]))
    return ports


def _exit_for_port(config: Config, tcp: Binding, port: int) -> Binding | None:
    for route in tcp.routes:
        for when in route.when:
            if port in _ports(when.get("port")) and route.exit:
                return config.bindings.get(route.exit)
    return config.bindings.get(tcp.exit) if tcp.exit else None


def _reached_http_servers(config: Config) -> list[Binding]:
    seen: dict[str, Binding] = {}
    for http, *_ in _listeners(config):
        seen.setdefault(http.name, http)
    return list(seen.values())


def _sse_channels(config: Config, http: Binding) -> Iterator[tuple[str, Binding, Route]]:
    """``(address, sse server, sse route)`` for every channel an http server leads to."""
    for http_route in [*http.routes, Route(exit=http.exit)] if http.exit else http.routes:
        sse = config.bindings.get(http_route.exit or "")
        if sse is None or (sse.type, sse.kind) != ("sse", "server"):
            continue
        path = next(
            (
                str(w["headers"][":path"])
                for w in http_route.when
                if ":path" in w.get("headers", {})
            ),
            None,
        )
        for route in _sse_routes(sse, path):
            target = config.bindings.get(route.exit or "")
            if target is not None and target.type == "sse-kafka":
                kafka_paths = [str(w["path"]) for r in target.routes for w in r.when if "path" in w]
                exact = [p for p in kafka_paths if p == path]
                for kafka_path in exact or kafka_paths:
                    yield kafka_path, sse, route
                continue
            sse_path = next((str(w["path"]) for w in route.when if "path" in w), None)
            address = path or (_glob_address(sse_path) if sse_path else None)
            if address is not None:
                yield address, sse, route


def _sse_routes(sse: Binding, path: str | None) -> list[Route]:
    routes = list(sse.routes)
    if sse.exit:
        routes.append(Route(exit=sse.exit))
    if path is None:
        return routes
    probe = PARAMETER.sub("x", path)
    picked = []
    for route in routes:
        globs: list[str] = [str(w["path"]) for w in route.when if "path" in w]
        if not globs or any(fnmatch.fnmatchcase(probe, g) for g in globs):
            picked.append(route)
            if globs:
                break
    return picked[:1] if picked else []


def _glob_address(glob: str) -> str:
    count = 0

    def parameter(_: re.Match[str]) -> str:
        nonlocal count
        count += 1
        return f"{{p{count}}}"

    return re.sub(r"\*+", parameter, glob)


def _payload(config: Config, sse: Binding, address: str) -> dict[str, Any] | None:
    probe = PARAMETER.sub("x", address)
    for entry in sse.options.get("requests") or []:
        if not fnmatch.fnmatchcase(probe, str(entry.get("path", ""))):
            continue
        content = entry.get("content")
        if not isinstance(content, dict) or content.get("model") != "json":
            return None
        for catalog, refs in (content.get("catalog") or {}).items():
            schema = _local_schema(config, catalog, refs[0] if refs else {})
            if schema is not None:
                return schema
    return None


def _local_schema(config: Config, catalog: str, ref: dict[str, Any]) -> dict[str, Any] | None:
    component = config.catalogs.get(catalog)
    if component is None or component.type != "inline" or "subject" not in ref:
        return None
    entry = (component.options.get("subjects") or {}).get(ref["subject"]) or {}
    try:
        schema = json.loads(str(entry.get("schema", "")))
    except ValueError:
        return None
    return schema if isinstance(schema, dict) else None


def _channel_name(address: str) -> str:
    name = re.sub(r"[^\w.\-]+", "_", address.replace("{", "").replace("}", "")).strip("_")
    return name or "root"


def _unique(name: str, taken: dict[str, Any]) -> str:
    candidate, number = name, 1
    while candidate in taken:
        number += 1
        candidate = f"{name}_{number}"
    return candidate

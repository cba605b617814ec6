"""``asyncapi`` bindings expanded into the bindings they stand for, before the config resolves.

:func:`expand_asyncapi` takes the schema-checked ``zilla.yaml`` document and returns it with
the bindings each ``asyncapi`` binding describes added next to it, named after it
(``<name>_tcp_server``, ``<name>_sse_server``, ...). The resolver then checks the result like
any hand-written config, so every rule (exits, guards, vaults, catalogs) applies unchanged. The
``asyncapi`` bindings stay in the config: an http route that exits to an ``asyncapi`` server
serves the AsyncAPI document of the running config (:mod:`ssegate.bindings.asyncapi.server`).

The subset (``docs/asyncapi.md`` has the full story):

- **server** (specs with ``http``/``https``/``sse``/``secure-sse`` servers): servers become a
  ``tcp`` server (``options.tcp`` overrides host and ports), a ``tls`` server for the secure
  ones, one ``http`` server; every operation's channel (``receive`` as Zilla writes it, or
  ``send``: :mod:`~ssegate.asyncapi.roles`) becomes an http route on
  ``<pathname><address>`` (``{params}`` kept) and an ``sse`` server route (``{params}`` as
  ``*``), guarded when the operation (or its server) requires an ``http`` bearer, ``oauth2`` or
  ``openIdConnect`` scheme; payload schemas become ``json`` models on an inline catalog.
- **proxy** (an SSE spec and a Kafka spec, routes ``when{spec, operation-id}`` →
  ``with{spec, operation-id}``, ``spec`` written ``api-id`` by older Zilla configs): an
  ``sse-kafka`` proxy, SSE channel address → Kafka channel address as the topic (``{param}`` →
  ``${params.param}``).
- **client** with a Kafka spec: ``kafka`` cache_client → cache_server → client → tcp (tls),
  the cache_server checking each topic's messages against the channel's payload and key
  schemas (:mod:`~ssegate.asyncapi.kafka_topics`); with an SSE/HTTP spec: ``sse`` client →
  ``http`` client → tcp (tls), the upstream SSE proxy.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ssegate.asyncapi.document import AsyncApiError
from ssegate.asyncapi.inline_catalog import catalog_model, json_schema_of
from ssegate.asyncapi.model import PARAMETER, ApiChannel, ApiOperation, SecurityUse
from ssegate.asyncapi.roles import SSE_PROTOCOLS, sse_operations
from ssegate.asyncapi.south import Entry, expand_client, expand_proxy, spec_label
from ssegate.asyncapi.specs import Spec, load_specs
from ssegate.config.errors import ConfigError, ConfigErrors
from ssegate.config.validate import validate_document

GUARD_TYPES = {("http", "bearer"), ("oauth2", ""), ("openIdConnect", "")}
DOCUMENT_OPTION = "document"
"""``options.http.document``: the path the generated http server serves the AsyncAPI at."""


def expand_asyncapi(document: Mapping[str, Any], *, base_dir: str) -> dict[str, Any]:
    """``document`` with the bindings its ``asyncapi`` bindings describe. Raises ConfigError."""
    bindings: dict[str, Any] = dict(document.get("bindings") or {})
    names = [n for n, b in bindings.items() if b.get("type") == "asyncapi"]
    if not names:
        return dict(document)
    result = copy.deepcopy(dict(document))
    catalogs: dict[str, Any] = result.get("catalogs") or {}
    result["catalogs"] = catalogs  # the inline catalogs of payload models are added here
    out: dict[str, Any] = result["bindings"]
    specs = {
        name: load_specs(name, bindings[name]["options"], catalogs, base_dir) for name in names
    }
    for name in names:  # the SSE side first: its problems are the ones to report
        if bindings[name]["kind"] == "server":
            for spec in specs[name]:
                _sse_operations(spec)
    entries: dict[str, Entry] = {}
    for name in names:
        if bindings[name]["kind"] == "client":
            entries[name] = expand_client(name, bindings[name], specs[name], out, catalogs)
    for name in names:
        if bindings[name]["kind"] == "proxy":
            entries[name] = expand_proxy(name, bindings[name], specs[name], entries, out)
    for name in names:
        if bindings[name]["kind"] == "server" and specs[name]:  # no specs: it serves documents
            _expand_server(name, bindings[name], specs[name], entries, result)
    if not catalogs:
        del result["catalogs"]
    validate_document(result)  # what was generated obeys the same schema as what was written
    return result


def _expand_server(
    name: str,
    raw: Mapping[str, Any],
    specs: list[Spec],
    entries: Mapping[str, Entry],
    result: dict[str, Any],
) -> None:
    options = raw.get("options") or {}
    out: dict[str, Any] = result["bindings"]
    where = f"bindings.{name}"
    operations = [(spec, op) for spec in specs for op in _sse_operations(spec)]
    if not operations:
        raise ConfigError(f"{where}.options.specs", "no spec has an SSE operation")
    sse_name, http_name = f"{name}_sse_server", f"{name}_http_server"
    guard = _guard_name(name, options, result, operations)
    sse_routes = []
    http_paths: list[str] = []
    requests = []
    for spec, operation in operations:
        address = _prefix(spec) + operation.channel.address
        glob = PARAMETER.sub("*", address)
        route: dict[str, Any] = {
            "when": [{"path": glob}],
            "exit": _operation_exit(name, raw, spec, operation, entries),
        }
        uses = operation.security or _server_security(spec)
        if uses and guard:
            route["guarded"] = {guard: sorted({r for u in uses for r in u.roles})}
        sse_routes.append(route)
        if address not in http_paths:
            http_paths.append(address)
            model = _payload_model(name, spec, operation.channel, result)
            if model is not None:
                requests.append({"path": glob, "content": model})
    sse_options = dict(options.get("sse") or {})
    if requests:
        sse_options["requests"] = requests
    out[sse_name] = {"type": "sse", "kind": "server", "routes": sse_routes}
    if sse_options:
        out[sse_name]["options"] = sse_options
    http_options = {k: v for k, v in (options.get("http") or {}).items() if k != DOCUMENT_OPTION}
    if guard and "authorization" not in http_options:
        bearer = {"headers": {"authorization": "Bearer {credentials}"}}
        http_options["authorization"] = {guard: {"credentials": bearer}}
    http_routes: list[dict[str, Any]] = [
        {"when": [{"headers": {":path": path}}], "exit": sse_name} for path in http_paths
    ]
    document_path = (options.get("http") or {}).get(DOCUMENT_OPTION)
    if document_path:
        http_routes.insert(0, {"when": [{"headers": {":path": document_path}}], "exit": name})
    out[http_name] = {"type": "http", "kind": "server", "routes": http_routes}
    if http_options:
        out[http_name]["options"] = http_options
    _listeners(name, raw, specs, out, http_name)


def _sse_operations(spec: Spec) -> list[ApiOperation]:
    try:
        return sse_operations(spec.api, spec.servers())
    except AsyncApiError as exc:
        raise spec.fail(exc) from None


def _prefix(spec: Spec) -> str:
    """The one ``pathname`` the spec's servers share ('' for none)."""
    servers = spec.servers()
    names = {s.pathname for s in servers}
    if len(names) > 1:
        raise spec.error(
            f"{servers[-1].where}/pathname", "servers of one spec must share their pathname"
        )
    return names.pop() if names else ""


def _operation_exit(
    name: str,
    raw: Mapping[str, Any],
    spec: Spec,
    operation: ApiOperation,
    entries: Mapping[str, Entry],
) -> str:
    exit_name: str | None = raw.get("exit")
    for route in raw.get("routes") or []:
        for when in route.get("when") or []:
            if (
                spec_label(when, spec.label) == spec.label
                and when.get("operation-id", operation.name) == operation.name
            ):
                exit_name = route["exit"]
                break
        else:
            continue
        break
    if exit_name is None:
        raise ConfigError(f"bindings.{name}.exit", "required: the binding SSE streams go to")
    entry = entries.get(exit_name)
    if entry is None:
        return exit_name  # a hand-written sse client or sse-kafka proxy: the resolver checks it
    if entry.kind not in ("sse-kafka", "sse"):
        raise ConfigError(
            f"bindings.{name}.exit",
            f"{exit_name!r} talks {entry.kind}; an SSE asyncapi server exits to an asyncapi"
            " proxy (SSE → Kafka) or an asyncapi client with an SSE spec (upstream SSE)",
        )
    return entry.binding


def _server_security(spec: Spec) -> tuple[SecurityUse, ...]:
    return tuple(u for server in spec.servers() for u in server.security)


def _guard_name(
    name: str,
    options: Mapping[str, Any],
    result: Mapping[str, Any],
    operations: list[tuple[Spec, ApiOperation]],
) -> str | None:
    uses = [
        (spec, use) for spec, op in operations for use in (op.security or _server_security(spec))
    ]
    if not uses:
        return None
    for spec, use in uses:
        if (use.type, use.http_scheme if use.type == "http" else "") not in GUARD_TYPES:
            raise spec.error(
                f"{use.where}/type",
                f"security scheme {use.type!r} {use.http_scheme or ''} is not supported"
                " (http bearer, oauth2, openIdConnect: checked by a jwt guard)".replace("  ", " "),
            )
    authorization = (options.get("http") or {}).get("authorization") or {}
    if len(authorization) == 1:
        return str(next(iter(authorization)))
    jwt_guards = [g for g, v in (result.get("guards") or {}).items() if v.get("type") == "jwt"]
    if not authorization and len(jwt_guards) == 1:
        return str(jwt_guards[0])
    spec, use = uses[0]
    raise ConfigError(
        f"bindings.{name}.options.http.authorization",
        f"{spec.label} {use.where} requires a bearer token: name the one jwt guard that checks it",
    )


def _payload_model(
    name: str, spec: Spec, channel: ApiChannel, result: dict[str, Any]
) -> dict[str, Any] | None:
    schema = json_schema_of(
        [(spec, m.payload) for m in channel.messages],
        "cannot check the events of an SSE channel, which are text (JSON Schema only)",
    )
    if schema is None:
        return None
    subject = f"{name}.{channel.name}"
    return catalog_model(result["catalogs"], f"{name}_catalog", subject, schema)


def _listeners(
    name: str, raw: Mapping[str, Any], specs: list[Spec], out: dict[str, Any], http_name: str
) -> None:
    options = raw.get("options") or {}
    tcp = dict(options.get("tcp") or {})
    servers = [(spec, server) for spec in specs for server in spec.servers()]
    if not servers and not tcp.get("port"):
        raise ConfigError(f"bindings.{name}.options.tcp.port", "no server in the specs: set it")
    hosts = {server.host for _, server in servers}
    if "host" not in tcp:
        if len(hosts) > 1:
            spec, server = servers[-1]
            raise spec.error(f"{server.where}/host", "servers differ in host: set options.tcp.host")
        tcp["host"] = hosts.pop() if hosts else "0.0.0.0"
    secure = [SSE_PROTOCOLS[server.protocol] for _, server in servers]
    tls_name = f"{name}_tls_server"
    if "port" in tcp:
        ports = tcp["port"] if isinstance(tcp["port"], list) else [tcp["port"]]
        if len(set(secure)) > 1 and len(ports) != len(servers):
            raise ConfigError(
                f"bindings.{name}.options.tcp.port",
                f"the specs mix secure and plain servers: give {len(servers)} ports, one each",
            )
    else:
        ports = []
        for spec, server in servers:
            if server.port is None:
                raise spec.error(f"{server.where}/host", "needs a port (or set options.tcp.port)")
            ports.append(server.port)
        tcp["port"] = ports if len(ports) > 1 else ports[0]
    errors = []
    if any(secure):
        if raw.get("vault") is None:
            errors.append(
                ConfigError(f"bindings.{name}.vault", "required: https servers need keys")
            )
        tls_options = dict(options.get("tls") or {})
        tls_options.setdefault("alpn", ["h2", "http/1.1"])
        out[tls_name] = {
            "type": "tls",
            "kind": "server",
            "vault": raw.get("vault"),
            "options": tls_options,
            "exit": http_name,
        }
    if errors:
        raise ConfigErrors(errors)
    tcp_binding: dict[str, Any] = {"type": "tcp", "kind": "server", "options": tcp}
    if len(set(secure)) > 1:
        tcp_binding["routes"] = [
            {"when": [{"port": port}], "exit": tls_name if is_secure else http_name}
            for port, is_secure in zip(ports, secure, strict=True)
        ]
    else:
        tcp_binding["exit"] = tls_name if secure and secure[0] else http_name
    out[f"{name}_tcp_server"] = tcp_binding

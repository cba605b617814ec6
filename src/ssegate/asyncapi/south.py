"""The south side of an AsyncAPI expansion: ``asyncapi`` proxy and client bindings.

A **client** with a Kafka spec (servers ``kafka``; ``kafka-secure`` is refused for now)
becomes ``<name>_kafka_cache_client`` → ``<name>_kafka_cache_server`` → ``<name>_kafka_client``
(bootstrap servers from the spec, or ``options.tcp``; ``options.kafka{sasl, topics,
bootstrap}`` passed on) → ``<name>_tcp_client``; the cache server's ``topics`` also model
the payload and key schemas of the spec's channels (:mod:`~ssegate.asyncapi.kafka_topics`).
A client with an SSE spec (servers ``http``/``https``/``sse``/``secure-sse``, exactly one
selected) becomes ``<name>_sse_client`` → ``<name>_http_client`` → (``<name>_tls_client``) →
``<name>_tcp_client`` aimed at that server.

A **proxy** maps operations of an SSE spec onto ``receive`` operations of a Kafka spec
(Zilla's ``when{spec, operation-id}`` → ``with{spec, operation-id}``, ``spec`` spelled
``api-id`` in older Zilla configs; without ``operation-id`` the operations of the same name are
paired) and becomes one
``<name>_sse_kafka`` proxy whose routes match the SSE channel's address and read the Kafka
channel's address as the topic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ssegate.asyncapi.kafka_topics import kafka_topics
from ssegate.asyncapi.model import PARAMETER, ApiOperation
from ssegate.asyncapi.roles import KAFKA_PROTOCOLS
from ssegate.asyncapi.roles import SSE_PROTOCOLS as SSE_CLIENT_PROTOCOLS
from ssegate.asyncapi.specs import Spec
from ssegate.config.errors import ConfigError

SPEC_KEYS = ("spec", "api-id")
"""The key a route's ``when`` and ``with`` name a spec by: Zilla's current one, then its
older one."""


@dataclass(frozen=True, slots=True)
class Entry:
    """Where streams enter what an asyncapi proxy or client expanded to."""

    binding: str
    kind: str
    """``kafka`` (a kafka cache_client), ``sse`` (an sse client) or ``sse-kafka``."""


def expand_client(
    name: str,
    raw: Mapping[str, Any],
    specs: list[Spec],
    out: dict[str, Any],
    catalogs: dict[str, Any],
) -> Entry:
    """The bindings of an asyncapi client, added to ``out``; the inline catalog of its topic
    models, if any, to ``catalogs``."""
    options = raw.get("options") or {}
    servers = [(spec, server) for spec in specs for server in spec.servers()]
    if not servers and not options.get("tcp"):
        raise ConfigError(f"bindings.{name}.options.specs", "no server to connect to")
    kinds = set()
    for spec, server in servers:
        if server.protocol in KAFKA_PROTOCOLS:
            kinds.add("kafka")
        elif server.protocol in SSE_CLIENT_PROTOCOLS:
            kinds.add("sse")
        else:
            supported = ", ".join([*KAFKA_PROTOCOLS, *SSE_CLIENT_PROTOCOLS])
            raise spec.error(
                f"{server.where}/protocol", f"{server.protocol!r} is not supported ({supported})"
            )
    if len(kinds) > 1:
        raise ConfigError(f"bindings.{name}.options.specs", "mixes Kafka and SSE servers")
    for spec, server in servers:
        if server.protocol == "kafka-secure":
            raise spec.error(
                f"{server.where}/protocol",
                "'kafka-secure' is not supported yet: the kafka client connects in plaintext"
                " (with SASL from options.kafka.sasl)",
            )
    secure = any(
        {**KAFKA_PROTOCOLS, **SSE_CLIENT_PROTOCOLS}[server.protocol] for _, server in servers
    )
    tcp_name, tls_name = f"{name}_tcp_client", f"{name}_tls_client"
    network = tls_name if secure else tcp_name
    if secure:
        out[tls_name] = {
            "type": "tls",
            "kind": "client",
            "options": dict(options.get("tls") or {}),
            "exit": tcp_name,
        }
        if raw.get("vault"):
            out[tls_name]["vault"] = raw["vault"]
    if kinds == {"sse"}:
        return _sse_chain(name, options, servers, network, tcp_name, out)
    return _kafka_chain(name, options, specs, servers, network, tcp_name, out, catalogs)


def _sse_chain(
    name: str,
    options: Mapping[str, Any],
    servers: list[Any],
    network: str,
    tcp_name: str,
    out: dict[str, Any],
) -> Entry:
    tcp = dict(options.get("tcp") or {})
    if not tcp:
        if len(servers) != 1:
            raise ConfigError(
                f"bindings.{name}.options.specs",
                "an SSE client connects to one server: select it with servers[] or set options.tcp",
            )
        spec, server = servers[0]
        if server.port is None:
            raise spec.error(f"{server.where}/host", "needs a port (or set options.tcp.port)")
        tcp = {"host": server.host, "port": server.port}
    out[tcp_name] = {"type": "tcp", "kind": "client", "options": tcp}
    http_options = {"versions": ["http/1.1"], **dict(options.get("http") or {})}
    out[f"{name}_http_client"] = {
        "type": "http",
        "kind": "client",
        "options": http_options,
        "exit": network,
    }
    out[f"{name}_sse_client"] = {"type": "sse", "kind": "client", "exit": f"{name}_http_client"}
    return Entry(f"{name}_sse_client", "sse")


def _kafka_chain(
    name: str,
    options: Mapping[str, Any],
    specs: list[Spec],
    servers: list[Any],
    network: str,
    tcp_name: str,
    out: dict[str, Any],
    catalogs: dict[str, Any],
) -> Entry:
    kafka = dict(options.get("kafka") or {})
    tcp = dict(options.get("tcp") or {})
    if tcp:
        ports = tcp.get("port")
        port_list = ports if isinstance(ports, list) else [ports]
        bootstrap = [f"{tcp.get('host', 'localhost')}:{p}" for p in port_list if p is not None]
    else:
        bootstrap = []
        for spec, server in servers:
            if server.port is None:
                raise spec.error(f"{server.where}/host", "needs a port (or set options.tcp)")
            bootstrap.append(f"{server.host}:{server.port}")
    if not bootstrap:
        raise ConfigError(f"bindings.{name}.options.tcp.port", "required: the broker's port")
    client_options: dict[str, Any] = {"servers": bootstrap}
    if "sasl" in kafka:
        client_options["sasl"] = kafka["sasl"]
    cache_options = {k: kafka[k] for k in ("bootstrap",) if k in kafka}
    topics = kafka_topics(name, specs, list(kafka.get("topics") or []), catalogs)
    if topics:
        cache_options["topics"] = topics
    first_host, _, first_port = bootstrap[0].rpartition(":")
    out[tcp_name] = {
        "type": "tcp",
        "kind": "client",
        "options": {"host": first_host, "port": int(first_port)},
    }
    out[f"{name}_kafka_client"] = {
        "type": "kafka",
        "kind": "client",
        "options": client_options,
        "exit": network,
    }
    out[f"{name}_kafka_cache_server"] = {
        "type": "kafka",
        "kind": "cache_server",
        "exit": f"{name}_kafka_client",
    }
    if cache_options:
        out[f"{name}_kafka_cache_server"]["options"] = cache_options
    out[f"{name}_kafka_cache_client"] = {
        "type": "kafka",
        "kind": "cache_client",
        "exit": f"{name}_kafka_cache_server",
    }
    return Entry(f"{name}_kafka_cache_client", "kafka")


def spec_label(entry: Mapping[str, Any], default: Any = None) -> Any:
    """The spec a ``when`` or ``with`` names (``spec``, or the older ``api-id``)."""
    for key in SPEC_KEYS:
        if key in entry:
            return entry[key]
    return default


def _spec_at(entry: Mapping[str, Any], where: str) -> str:
    """The YAML path of the key ``entry`` names its spec with."""
    return f"{where}.{next((k for k in SPEC_KEYS if k in entry), SPEC_KEYS[0])}"


def expand_proxy(
    name: str,
    raw: Mapping[str, Any],
    specs: list[Spec],
    entries: Mapping[str, Entry],
    out: dict[str, Any],
) -> Entry:
    by_label = {spec.label: spec for spec in specs}
    routes = []
    for index, route in enumerate(raw.get("routes") or []):
        where = f"bindings.{name}.routes[{index}]"
        target = entries.get(route["exit"])
        if target is None or target.kind != "kafka":
            raise ConfigError(
                f"{where}.exit", "an asyncapi proxy exits to an asyncapi client with a Kafka spec"
            )
        with_ = route.get("with") or {}
        kafka = _spec(by_label, spec_label(with_), _spec_at(with_, f"{where}.with"))
        for w_index, when in enumerate(route.get("when") or []):
            when_at = f"{where}.when[{w_index}]"
            sse = _spec(by_label, spec_label(when), _spec_at(when, when_at))
            for operation in _pick(sse, when.get("operation-id"), f"{when_at}.operation-id"):
                wanted = (route.get("with") or {}).get("operation-id") or operation.name
                kafka_op = kafka.api.operations.get(wanted)
                if kafka_op is None:
                    raise ConfigError(
                        f"{where}.with.operation-id",
                        f"spec {kafka.label!r} has no operation {wanted!r}",
                    )
                routes.append(_sse_kafka_route(sse, operation, kafka, kafka_op, target.binding))
    if not routes:
        raise ConfigError(f"bindings.{name}.routes", "map at least one SSE operation to Kafka")
    out[f"{name}_sse_kafka"] = {"type": "sse-kafka", "kind": "proxy", "routes": routes}
    return Entry(f"{name}_sse_kafka", "sse-kafka")


def _spec(by_label: Mapping[str, Spec], label: Any, where: str) -> Spec:
    spec = by_label.get(str(label))
    if spec is None:
        raise ConfigError(where, f"{label!r} is not one of the specs ({', '.join(by_label)})")
    return spec


def _pick(spec: Spec, operation_id: Any, where: str) -> list[ApiOperation]:
    if operation_id is None:
        return list(spec.api.operations.values())
    operation = spec.api.operations.get(str(operation_id))
    if operation is None:
        raise ConfigError(where, f"spec {spec.label!r} has no operation {operation_id!r}")
    return [operation]


def _sse_kafka_route(
    sse: Spec, operation: ApiOperation, kafka: Spec, kafka_op: ApiOperation, exit_name: str
) -> dict[str, Any]:
    sse.require_path(operation.channel)
    if kafka_op.action != "receive":
        raise kafka.error(
            f"{kafka_op.where}/action",
            "the gateway reads the topic: the Kafka operation must be 'receive'",
        )
    topic = kafka_op.channel.address
    for parameter in PARAMETER.findall(topic):
        if parameter not in operation.channel.parameters:
            raise kafka.error(
                kafka_op.channel.address_at,
                f"parameter {{{parameter}}} is not a parameter of the SSE channel"
                f" {operation.channel.address!r}",
            )
    prefixes = {s.pathname for s in sse.servers()}
    path = (prefixes.pop() if len(prefixes) == 1 else "") + operation.channel.address
    with_topic = PARAMETER.sub(lambda m: "${params." + m.group(1) + "}", topic)
    return {"when": [{"path": path}], "exit": exit_name, "with": {"topic": with_topic}}

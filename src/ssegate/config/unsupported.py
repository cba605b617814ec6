"""What the schema accepts and this version of ssegate does not run: refused, by YAML path.

The schema (:mod:`ssegate.config.schema`) follows Zilla's, so it takes options ssegate has no
use for yet (a tls ``signers`` store, http client ``overrides``, routes on a tcp client...).
Accepting such an option and doing nothing would run a config that means something else than it
says, so each is refused with :class:`~ssegate.config.errors.NotSupportedYet` naming its path:
``ssegate validate`` prints it as a warning and ``ssegate start`` does not start. The runtime
calls :func:`refuse_unsupported` before it builds a binding, and
:func:`refuse_unsupported_component` before a vault, catalog or exporter; options that only make
sense with others (a model's ``pattern`` on a ``json`` model) are refused where they are read.

What Zilla has and ssegate does not run at all is named as such, not as a typo: a binding
``type`` of Zilla's (:func:`is_zilla_binding_type`, which also takes every ``mcp-*`` type of
Zilla's growing MCP family) and a top-level section of Zilla's (:data:`ZILLA_SECTIONS`, such as
``stores``), refused by :mod:`ssegate.config.validate` with what ssegate runs instead.
"""

from __future__ import annotations

from collections.abc import Mapping

from ssegate.config.errors import ConfigError, NotSupportedYet
from ssegate.config.model import Binding, Component

ZILLA_BINDING_TYPES = frozenset(
    {
        "amqp",
        "echo",
        "fan",
        "grpc",
        "grpc-kafka",
        "http-kafka",
        "kafka-grpc",
        "kafka-proxy",
        "mcp",
        "mqtt",
        "mqtt-kafka",
        "openapi",
        "openapi-asyncapi",
        "pgsql",
        "pgsql-kafka",
        "proxy",
        "risingwave",
        "ws",
    }
)
"""Binding types Zilla has that ssegate does not run (besides the ``mcp-*`` family)."""
ZILLA_TYPE_FAMILIES = ("mcp-",)
"""Prefixes of Zilla binding types that grow with each Zilla release (``mcp-http``,
``mcp-kafka``, ``mcp-openapi``, ...), none of which ssegate runs."""

ZILLA_SECTIONS: Mapping[str, str] = {
    "stores": "no binding ssegate runs keeps its state in a store",
}
"""Top-level sections of Zilla's ``zilla.yaml`` that ssegate does not run, and why."""

_SERVER_ONLY = "is an sse server option: an sse client does not use it"
_HTTP_CLIENT = "is not supported yet on an http client (it applies to the http server)"
_PROTOCOL = "is not supported yet: ssegate has no {0} binding"
_UNUSED_HERE = "is not used by an asyncapi {0}: {1}"

BINDING_OPTIONS: Mapping[tuple[str, str], Mapping[str, str]] = {
    ("tls", "server"): {
        "signers": "is not supported yet (no tls binding signs certificates here)",
        "trustcacerts": "is not supported yet on a tls server: client certificates are checked"
        " against options.trust only",
    },
    ("tls", "client"): {
        "signers": "is not supported yet (no tls binding signs certificates here)",
        "mutual": "is a tls server option: a tls client presents options.keys when it has them",
    },
    ("http", "client"): {
        "access-control": _HTTP_CLIENT,
        "authorization": _HTTP_CLIENT,
        "overrides": _HTTP_CLIENT,
        "requests": _HTTP_CLIENT,
    },
    ("sse", "client"): {
        "requests": _SERVER_ONLY,
        "keepalive": _SERVER_ONLY,
        "initial-comment": _SERVER_ONLY,
        "max-buffered": _SERVER_ONLY,
        "slow-client-timeout": _SERVER_ONLY,
        "x-ssegate-quotas": _SERVER_ONLY,
    },
    ("asyncapi", "server"): {
        "kafka": _UNUSED_HERE.format("server", "its streams come from its exit"),
        "mqtt-kafka": _PROTOCOL.format("mqtt-kafka"),
        "http-kafka": _PROTOCOL.format("http-kafka"),
    },
    ("asyncapi", "client"): {
        "sse": _UNUSED_HERE.format("client", "it expands to an sse client with no options"),
        "mqtt-kafka": _PROTOCOL.format("mqtt-kafka"),
        "http-kafka": _PROTOCOL.format("http-kafka"),
    },
    ("asyncapi", "proxy"): {
        **{
            name: _UNUSED_HERE.format("proxy", "it expands to an sse-kafka proxy only")
            for name in ("tcp", "tls", "http", "kafka", "sse")
        },
        "mqtt-kafka": _PROTOCOL.format("mqtt-kafka"),
        "http-kafka": _PROTOCOL.format("http-kafka"),
    },
}
"""``options`` keys refused per binding ``(type, kind)``, with what the refusal says."""

TOPIC_OPTIONS: Mapping[str, str] = {
    "deltaType": "is not supported yet: the cache keeps and hands out whole values",
}
"""``options.topics[]`` keys refused on a kafka ``cache_server``."""

WITHOUT_ROUTES: Mapping[tuple[str, str], str] = {
    ("tcp", "client"): "a tcp client connects to options.host and port",
    ("tls", "client"): "a tls client hands every connection to its exit",
    ("http", "client"): "an http client hands every request to its exit",
    ("sse", "client"): "an sse client hands every stream to its exit",
    ("filesystem", "server"): "a filesystem server ends the chain",
    ("kafka", "client"): "a kafka client hands every connection to its exit",
    ("kafka", "cache_client"): "a kafka cache_client reads every topic through its exit",
    ("kafka", "cache_server"): "a kafka cache_server reads every topic through its exit",
    ("asyncapi", "client"): "an asyncapi client expands to one chain, its exit's",
}
"""Bindings whose ``routes`` are not supported yet (they use their ``exit``), and why."""

WHEN_KEYS: Mapping[tuple[str, str], frozenset[str]] = {
    ("tls", "server"): frozenset({"alpn"}),
}
"""The ``when`` keys a binding routes by, where the schema takes more (a tcp server refuses its
own: :mod:`ssegate.bindings.tcp.server`)."""

GUARDED_ROUTES = frozenset(
    {("http", "server"), ("sse", "server"), ("sse-kafka", "proxy"), ("http-filesystem", "proxy")}
)
"""Bindings that enforce a route's ``guarded``."""

COMPONENT_OPTIONS: Mapping[tuple[str, str], Mapping[str, str]] = {
    ("vault", "filesystem"): {
        "signers": "is not supported yet (no tls binding signs certificates here)",
    },
    ("catalog", "apicurio"): {
        "id-encoding": "is not supported yet: ids are read in the default 4-byte encoding",
    },
}
"""Options refused per component ``(kind, type)``."""


def is_zilla_binding_type(type_: object) -> bool:
    """Whether ``type_`` names a binding type of Zilla's that ssegate does not run."""
    return isinstance(type_, str) and (
        type_ in ZILLA_BINDING_TYPES or type_.startswith(ZILLA_TYPE_FAMILIES)
    )


def zilla_only_sections(document: Mapping[str, object]) -> list[ConfigError]:
    """One error per top-level section of ``document`` that only Zilla runs."""
    return [
        ConfigError(name, f"{name!r} is a Zilla section that ssegate does not run ({why})")
        for name, why in ZILLA_SECTIONS.items()
        if name in document
    ]


def refuse_unsupported(binding: Binding) -> None:
    """Raise :class:`NotSupportedYet` for the first option of ``binding`` this version does
    not run (an option, a route, a ``when`` key, a ``with``, a ``guarded``)."""
    role = (binding.type, binding.kind)
    where = f"{binding.path}.options"
    for name, message in BINDING_OPTIONS.get(role, {}).items():
        if name in binding.options:
            raise NotSupportedYet(f"{where}.{name}", message)
    if role == ("kafka", "cache_server"):
        for index, topic in enumerate(binding.options.get("topics") or ()):
            for name, message in TOPIC_OPTIONS.items():
                if isinstance(topic, Mapping) and name in topic:
                    raise NotSupportedYet(f"{where}.topics[{index}].{name}", message)
    for route in binding.routes:
        if role in WITHOUT_ROUTES:
            raise NotSupportedYet(
                route.path, f"routes are not supported yet here: {WITHOUT_ROUTES[role]}"
            )
        if route.guarded and role not in GUARDED_ROUTES:
            raise NotSupportedYet(
                f"{route.path}.guarded",
                f"{binding.type} {binding.kind} routes take no guard; put it on the http"
                " server's route",
            )
        if route.with_ is not None and role == ("asyncapi", "server"):
            raise NotSupportedYet(
                f"{route.path}.with", "an asyncapi server route picks an exit, it has no with"
            )
        _refuse_when_keys(route.when, route.path, WHEN_KEYS.get(role), binding.type)


def _refuse_when_keys(
    when: list[dict[str, object]], where: str, allowed: frozenset[str] | None, type_: str
) -> None:
    if allowed is None:
        return
    for index, entry in enumerate(when):
        for key in sorted(set(entry) - allowed) if isinstance(entry, Mapping) else ():
            raise NotSupportedYet(
                f"{where}.when[{index}].{key}",
                f"{type_} routes by {', '.join(sorted(allowed))} only in this version",
            )


def refuse_unsupported_component(kind: str, component: Component) -> None:
    """Raise :class:`NotSupportedYet` for the first option of a vault, catalog or exporter
    this version does not run."""
    for name, message in COMPONENT_OPTIONS.get((kind, component.type), {}).items():
        if name in component.options:
            raise NotSupportedYet(f"{component.path}.options.{name}", message)

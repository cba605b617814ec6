"""The ``kafka`` client binding: how this process reaches the Kafka cluster.

``options{servers[], sasl{mechanism, username, password}}`` become a librdkafka
(confluent-kafka) configuration; :meth:`KafkaClient.consumer_config` and
:meth:`KafkaClient.admin_config` hand it to whoever opens a handle (the cache server's fetch
thread). The binding's ``exit`` is a ``tcp`` client: librdkafka opens its own sockets to
``servers`` and to the brokers they advertise, so the tcp client's host and port, if any, do
not override ``servers``.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding
from ssegate.engine.context import BuildContext

SASL_MECHANISMS = {
    "plain": "PLAIN",
    "scram-sha-256": "SCRAM-SHA-256",
    "scram-sha-512": "SCRAM-SHA-512",
}

# librdkafka reports every refused connection while a broker is away; the cache reports broker
# availability as its own events, so the library's lines stay out of the gateway's log.
_library_log = logging.Logger("ssegate.kafka.librdkafka", level=logging.CRITICAL)
_library_log.addHandler(logging.NullHandler())


@dataclass(frozen=True, slots=True)
class Sasl:
    mechanism: str
    username: str
    password: str


@dataclass(slots=True)
class KafkaClient:
    name: str
    servers: tuple[str, ...]
    sasl: Sasl | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    """Extra librdkafka settings, applied last."""

    def common_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {
            "bootstrap.servers": ",".join(self.servers),
            "client.id": f"ssegate-{self.name}",
            "reconnect.backoff.ms": 100,
            "reconnect.backoff.max.ms": 2000,
            "logger": _library_log,
        }
        if self.sasl is not None:
            config |= {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": SASL_MECHANISMS[self.sasl.mechanism],
                "sasl.username": self.sasl.username,
                "sasl.password": self.sasl.password,
            }
        config.update(self.settings)
        return config

    def consumer_config(self, purpose: str) -> dict[str, Any]:
        """A consumer that reads by explicit ``assign`` offsets and never commits.

        librdkafka requires a ``group.id`` even then; a unique one keeps any group coordinator
        out of it."""
        return self.common_config() | {
            "group.id": f"ssegate-{purpose}-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "allow.auto.create.topics": False,
            "topic.metadata.refresh.interval.ms": 5000,
            "fetch.wait.max.ms": 50,
            "enable.partition.eof": True,
        }

    def admin_config(self) -> dict[str, Any]:
        return self.common_config()


def build(binding: Binding, ctx: BuildContext) -> KafkaClient:
    options = binding.options
    servers = tuple(str(s) for s in options.get("servers") or ())
    if not servers:
        raise ConfigError(
            f"{binding.path}.options.servers", "at least one bootstrap server is needed"
        )
    for index, server in enumerate(servers):
        host, sep, port = server.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigError(
                f"{binding.path}.options.servers[{index}]", f"'{server}' is not host:port"
            )
    sasl_options = options.get("sasl")
    sasl = None
    if sasl_options is not None:
        sasl = Sasl(
            str(sasl_options["mechanism"]),
            str(sasl_options["username"]),
            str(sasl_options["password"]),
        )
    if binding.exit is not None:
        exit_binding = ctx.binding(binding.exit)
        if exit_binding.type != "tcp":
            raise ConfigError(
                f"{binding.path}.exit",
                f"a kafka client exits to a tcp client, not to '{exit_binding.type}'",
            )
    return KafkaClient(binding.name, servers, sasl)

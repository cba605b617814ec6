"""What an AsyncAPI document is for, and the checks that role asks: one reader for everything.

An ``asyncapi`` binding and ``ssegate asyncapi validate`` read a document the same way, through
:func:`read_spec`: parse, check against the official schema, follow every ``$ref``
(:mod:`~ssegate.asyncapi.document`), reduce to an :class:`~ssegate.asyncapi.model.Api`. Then
the role of the document decides the rest, through the same functions for both, so they never
disagree:

- an **SSE** document (any document without a Kafka server; its servers must be ``http``,
  ``https``, ``sse`` or ``secure-sse``): :func:`sse_operations`. Every operation is an event
  stream at its channel's address, which must be a path. The operation's ``action`` may be
  ``receive``, as Zilla's SSE documents write it (the view of the application that reads the
  stream), or ``send`` (the view of the gateway that writes it, the one ``ssegate asyncapi
  export`` writes). ssegate runs both.
- a **Kafka** document (a server ``kafka`` or ``kafka-secure``): every server is one of those;
  an asyncapi proxy asks its operation to ``receive`` (the gateway reads the topic) where it
  maps one.

Every refusal is an :class:`~ssegate.asyncapi.document.AsyncApiError` carrying the JSON pointer
of the problem; the binding puts the YAML path of its spec entry before it.
"""

from __future__ import annotations

from collections.abc import Sequence

from ssegate.asyncapi.document import AsyncApiError, load_document
from ssegate.asyncapi.model import Api, ApiOperation, ApiServer, read_api

SSE_PROTOCOLS = {"http": False, "sse": False, "https": True, "secure-sse": True}
"""Server protocols of an SSE document, and whether they are secure."""
KAFKA_PROTOCOLS = {"kafka": False, "kafka-secure": True}
"""Server protocols of a Kafka document, and whether they are secure."""
SSE_ACTIONS = ("receive", "send")
"""The actions an SSE operation may take: Zilla's ``receive`` and the specification's ``send``."""


def read_spec(text: str, source: str) -> Api:
    """The :class:`Api` of the document in ``text``; raises :class:`AsyncApiError`."""
    return read_api(load_document(text, source))


def role_of(api: Api) -> str:
    """``kafka`` when a server speaks Kafka, else ``sse``: ssegate runs nothing else."""
    if any(server.protocol in KAFKA_PROTOCOLS for server in api.servers):
        return "kafka"
    return "sse"


def sse_operations(api: Api, servers: Sequence[ApiServer]) -> list[ApiOperation]:
    """The event streams of an SSE document served on ``servers`` (the document's own, or the
    ones a binding selected); raises :class:`AsyncApiError` at the first that cannot be one."""
    for server in servers:
        if server.protocol not in SSE_PROTOCOLS:
            raise AsyncApiError(
                f"{server.where}/protocol",
                f"{server.protocol!r} is not an SSE server protocol ({', '.join(SSE_PROTOCOLS)})",
            )
    operations = []
    for operation in api.operations.values():
        if operation.action not in SSE_ACTIONS:  # 3.0 has no other action; kept for safety
            raise AsyncApiError(
                f"{operation.where}/action",
                f"{operation.action!r}: an SSE operation is 'receive' or 'send'",
            )
        channel = operation.channel
        if not channel.address.startswith("/"):
            raise AsyncApiError(
                channel.address_at,
                f"{channel.address!r} is not a path: an SSE channel address starts with '/'",
            )
        operations.append(operation)
    return operations


def check_spec(api: Api) -> str:
    """Check ``api`` as its role asks (see the module) and return the role."""
    role = role_of(api)
    if role == "sse":
        sse_operations(api, api.servers)
        return role
    for server in api.servers:
        if server.protocol not in KAFKA_PROTOCOLS:
            raise AsyncApiError(
                f"{server.where}/protocol",
                f"{server.protocol!r} is not a Kafka server protocol"
                f" ({', '.join(KAFKA_PROTOCOLS)}), and the other servers are",
            )
    return role

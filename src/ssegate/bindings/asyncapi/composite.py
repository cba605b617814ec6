"""The ``asyncapi`` proxy and client at run time: nothing of their own to run.

:func:`ssegate.asyncapi.expand.expand_asyncapi` turned each into the bindings its specs
describe (``<name>_sse_kafka``, ``<name>_kafka_cache_client``, ``<name>_sse_client``, ...);
streams go through those. What is built here only names them, for ``ssegate validate``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ssegate.config.model import Binding
from ssegate.engine.context import BuildContext


@dataclass(frozen=True, slots=True)
class ExpandedBinding:
    name: str
    parts: tuple[str, ...]
    """The generated bindings, by name."""


def build(binding: Binding, ctx: BuildContext) -> ExpandedBinding:
    prefix = f"{binding.name}_"
    parts = tuple(n for n in ctx.config.bindings if n.startswith(prefix))
    return ExpandedBinding(binding.name, parts)

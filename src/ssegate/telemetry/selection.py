"""``telemetry.metrics`` and each binding's ``telemetry.metrics``: which Zilla metrics export.

Zilla records a metric for a binding only when the top-level ``telemetry.metrics`` names it and
the binding's own ``telemetry.metrics`` does too (``*`` stands for any run of characters:
``http.*``, ``stream.*``). ssegate counts everything anyway; the ``prometheus`` exporter then
exposes a Zilla-named series (``stream.opens.received``, ``http.duration``) only when both lists
let it through, as Zilla would have recorded it. A config with neither list exposes every
series; ssegate's own (``ssegate.*``), which Zilla has no name for, are always exposed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

OWN_PREFIX = "ssegate."


def _patterns(names: Iterable[Any]) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(".*".join(map(re.escape, str(name).split("*")))) for name in names)


@dataclass(frozen=True, slots=True)
class MetricSelection:
    """The Zilla metrics a config asked for, overall and per binding."""

    declared: tuple[re.Pattern[str], ...] | None
    """The top-level list; ``None`` when the config has none (every name is declared)."""
    by_binding: Mapping[str, tuple[re.Pattern[str], ...]]

    @classmethod
    def of(
        cls, telemetry: Mapping[str, Any], bindings: Mapping[str, Mapping[str, Any]]
    ) -> MetricSelection | None:
        """From ``telemetry`` and each binding's ``telemetry``; ``None``: export everything."""
        top = telemetry.get("metrics")
        by_binding = {
            name: _patterns(own["metrics"])
            for name, own in bindings.items()
            if own.get("metrics") is not None
        }
        if top is None and not by_binding:
            return None
        return cls(None if top is None else _patterns(top), by_binding)

    def exports(self, name: str, binding: str) -> bool:
        """Whether the series of metric ``name`` for ``binding`` is exposed."""
        if name.startswith(OWN_PREFIX):
            return True
        if self.declared is not None and not any(p.fullmatch(name) for p in self.declared):
            return False
        return any(p.fullmatch(name) for p in self.by_binding.get(binding, ()))

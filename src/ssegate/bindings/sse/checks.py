"""The sse server's ``requests[]{path, content}``: the check each event's data must pass.

Each entry with a ``content`` model becomes one :class:`ContentCheck` (an
:class:`~ssegate.bindings.sse.source.EventCheck`), shared by every stream whose path matches the
entry's ``path`` (first match wins). A stream's sink applies it to the events it is given one by
one; a source that encodes events once for many streams applies it once per event (see
:mod:`ssegate.bindings.sse.source`). Either way a failure is one ``sse.invalid_event`` log line
and one count in ``ssegate.sse.invalid_events``, and the event is replaced by its id alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ssegate.bindings.http.routing import Pattern
from ssegate.config.errors import NotSupportedYet
from ssegate.engine.context import BuildContext
from ssegate.telemetry import log
from ssegate.telemetry.metrics import Metrics

Validator = Callable[[str], str | None]
"""Returns ``None`` for valid event data, else the reason it is invalid."""


class ContentCheck:
    """One ``requests[].content`` model of one sse server, with its log line and counter."""

    __slots__ = ("binding", "metrics", "validate")

    def __init__(self, validate: Validator, binding: str, metrics: Metrics) -> None:
        self.validate = validate
        self.binding = binding
        self.metrics = metrics

    def __call__(self, data: str) -> str | None:
        return self.validate(data)

    def refused(self, reason: str, **context: object) -> None:
        log.warning("sse.invalid_event", binding=self.binding, **context, reason=reason)
        self.metrics.inc("ssegate.sse.invalid_events", self.binding)


def _model_validator(content: dict[str, Any], path: str, ctx: BuildContext) -> Validator:
    from ssegate.models import build_model

    catalogs = ctx.catalogs if content.get("catalog") else None
    validate = build_model(content, path, catalogs).validate
    return lambda data: validate(data.encode())


VALIDATOR_FACTORIES: dict[str, Callable[[dict[str, Any], str, BuildContext], Validator]] = {
    "json": _model_validator,
    "avro": _model_validator,
    "protobuf": _model_validator,
    "string": _model_validator,
}
"""``requests[].content.model`` → validator factory (:mod:`ssegate.models`, with catalogs)."""


def compile_checks(
    requests: Any, where: str, binding: str, ctx: BuildContext
) -> list[tuple[Pattern, ContentCheck]]:
    """``options.requests`` (at YAML path ``where``) → (path pattern, check), in order."""
    checks: list[tuple[Pattern, ContentCheck]] = []
    for index, entry in enumerate(requests or []):
        entry_where = f"{where}[{index}]"
        content = entry.get("content")
        if content is None:
            continue
        model = content.get("model") if isinstance(content, dict) else content
        factory = VALIDATOR_FACTORIES.get(str(model))
        if factory is None:
            raise NotSupportedYet(f"{entry_where}.content", f"model '{model}' is not supported yet")
        config = content if isinstance(content, dict) else {"model": model}
        pattern = Pattern.compile(str(entry.get("path", "*")), f"{entry_where}.path")
        validate = factory(config, f"{entry_where}.content", ctx)
        checks.append((pattern, ContentCheck(validate, binding, ctx.metrics)))
    return checks

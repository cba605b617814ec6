"""What the schema says about a small config: the errors ``ssegate validate`` would print."""

from __future__ import annotations

from typing import Any

from ssegate.config.errors import ConfigErrors
from ssegate.config.validate import validate_document


def schema_errors(**sections: Any) -> list[str]:
    """The schema's errors (``path: message``) for a config named ``x`` holding ``sections``."""
    try:
        validate_document({"name": "x", **sections})
    except ConfigErrors as exc:
        return [str(error) for error in exc.errors]
    return []


def binding_errors(name: str, type_: str, kind: str, **fields: Any) -> list[str]:
    """The schema's errors for one binding ``name`` of ``type_`` and ``kind`` with ``fields``
    (``options``, ``exit``, ``vault``...)."""
    return schema_errors(bindings={name: {"type": type_, "kind": kind, **fields}})

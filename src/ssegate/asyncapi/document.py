"""Reading an AsyncAPI document and checking it against the official JSON Schema.

:func:`load_document` parses YAML or JSON text and validates it against the schema of the
version it declares (``asyncapi: 3.0.0`` or ``2.6.0``), shipped in ``schemas/`` (copied from
the npm package ``@asyncapi/specs``, Apache-2.0, see ``schemas/NOTICE``). Every refusal is an
:class:`AsyncApiError` carrying the JSON pointer of the problem, ``/channels/events/address``,
so a person finds it in the document without guessing.

:func:`resolve_ref` follows local ``$ref`` pointers (``#/components/...``); references to other
files are refused, the document must stand alone. A ``$ref`` that points at nothing is refused
at its own pointer when it is followed
(``/operations/onEvents/channel/$ref: '#/channels/x' points at nothing``). One in a part nothing
follows is what Zilla runs (its older ``asyncapi.sse.kafka.proxy`` Kafka document has one), so
ssegate runs it too, and :func:`dangling_refs` names each such ``$ref`` for the document's notes
(:attr:`~ssegate.asyncapi.model.Api.notes`): a typo in a part the gateway does not read is still
found, by ``ssegate asyncapi validate`` and by the binding alike.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft7Validator
from jsonschema.exceptions import ValidationError, relevance

from ssegate.config.errors import ConfigError
from ssegate.config.yaml_reader import load_yaml_text

SUPPORTED_VERSIONS = ("3.0.0", "2.6.0")


class AsyncApiError(ConfigError):
    """A problem in an AsyncAPI document, reported as ``<json pointer>: <message>``."""

    @property
    def pointer(self) -> str:
        return str(self.path)


def pointer(parts: Iterable[str | int]) -> str:
    """The JSON pointer of ``parts`` (``~`` and ``/`` escaped); ``/`` for the whole document."""
    escaped = [str(p).replace("~", "~0").replace("/", "~1") for p in parts]
    return "/" + "/".join(escaped) if escaped else "/"


@cache
def official_schema(version: str) -> dict[str, Any]:
    """The official JSON Schema (draft-07) of AsyncAPI ``version``."""
    text = resources.files("ssegate.asyncapi").joinpath(f"schemas/{version}.json").read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


@cache
def _validator(version: str) -> Draft7Validator:
    return Draft7Validator(official_schema(version))


def parse_text(text: str, source: str = "<asyncapi>") -> dict[str, Any]:
    """The document in ``text`` (YAML, of which JSON is a subset), as plain values, read within
    the limits of a config (:mod:`ssegate.config.yaml_reader`: size, nesting, aliases)."""
    try:
        document = load_yaml_text(text, source, "AsyncAPI document")
    except ConfigError as exc:
        raise AsyncApiError("/", str(exc)) from None
    if not isinstance(document, dict):
        raise AsyncApiError("/", f"{source} must be a mapping with an 'asyncapi' version")
    return document


def load_document(text: str, source: str = "<asyncapi>") -> dict[str, Any]:
    """Parse and validate an AsyncAPI 3.0.0 or 2.6.0 document. Raises :class:`AsyncApiError`."""
    document = parse_text(text, source)
    validate_document(document)
    return document


def validate_document(document: Mapping[str, Any]) -> None:
    """Check ``document`` against the official schema of its version."""
    version = document.get("asyncapi")
    if version not in SUPPORTED_VERSIONS:
        supported = " or ".join(SUPPORTED_VERSIONS)
        raise AsyncApiError("/asyncapi", f"version {version!r} is not supported ({supported})")
    errors = list(_validator(str(version)).iter_errors(document))
    if errors:
        deepest = _deepest(min(errors, key=_rank))
        raise AsyncApiError(pointer(deepest.absolute_path), _message(deepest))


def dangling_refs(document: Mapping[str, Any]) -> list[str]:
    """``<pointer>/$ref: <why>`` for each ``$ref`` of ``document``, in document order, that
    cannot be followed."""
    found = []
    for where, value in _refs(document, "", 0):
        try:
            resolve_ref(document, value, where)
        except AsyncApiError as exc:
            found.append(str(exc))
    return found


def _refs(value: Any, where: str, depth: int) -> Iterable[tuple[str, Mapping[str, Any]]]:
    """Every mapping with a string ``$ref`` inside ``value``, with its pointer."""
    if depth > 64:  # the YAML reader bounds nesting well below this
        return
    if isinstance(value, Mapping):
        if isinstance(value.get("$ref"), str):
            yield where, value
        for key, item in value.items():
            if key != "$ref":
                yield from _refs(item, f"{where}/{pointer([str(key)])[1:]}", depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _refs(item, f"{where}/{index}", depth + 1)


def _rank(error: ValidationError) -> tuple[int, ...]:
    """Sort key: the first problem in document order, deepest paths before shallow ones."""
    depth = -len(error.absolute_path)
    return (0, depth) if error.context is None else (1, depth)


def _deepest(error: ValidationError) -> ValidationError:
    """For ``oneOf``/``anyOf`` failures, the alternative that got furthest into the value.

    A ``$ref`` alternative (``{"$ref": ...}`` objects) is skipped unless the value has a
    ``$ref``: a channel is almost never meant to be a reference.
    """
    while error.context:
        candidates = [
            e
            for e in error.context
            if not (e.validator == "required" and "'$ref'" in e.message)
            and "$ref" not in e.schema_path
        ] or list(error.context)
        best = max(candidates, key=lambda e: (len(e.absolute_path), -relevance(e)[0]))
        if len(best.absolute_path) <= len(error.absolute_path) and best.validator in (
            "oneOf",
            "anyOf",
        ):
            error = best
            continue
        if len(best.absolute_path) < len(error.absolute_path):
            break
        error = best
    return error


def _message(error: ValidationError) -> str:
    message = str(error.message)
    if error.validator == "additionalProperties" and "does not match any" in message:
        extra = message.split(" does not match", 1)[0]
        message = f"{extra} is not allowed here (only x- extensions may be added)"
    return message if len(message) <= 200 else message[:197] + "..."


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) < 60 else text[:57] + "..."


def resolve_ref(document: Mapping[str, Any], value: Any, where: str) -> tuple[Any, str]:
    """``value`` with its ``$ref`` (if any) followed, and the pointer it now sits at."""
    seen: set[str] = set()
    while isinstance(value, Mapping) and "$ref" in value:
        ref = value["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/"):
            raise AsyncApiError(
                f"{where}/$ref", f"{ref!r}: only references inside the document (#/...) are read"
            )
        if ref in seen:
            raise AsyncApiError(f"{where}/$ref", f"{ref!r} refers back to itself")
        seen.add(ref)
        target: Any = document
        for raw in ref[2:].split("/"):
            part = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(target, Mapping) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                raise AsyncApiError(f"{where}/$ref", f"{ref!r} points at nothing")
        value, where = target, ref[1:]
    return value, where

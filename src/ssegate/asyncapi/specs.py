"""Finding the AsyncAPI documents an ``asyncapi`` binding names in ``options.specs``.

A spec is either a file path (relative to the config file) or Zilla's
``{catalog: {<catalog>: {subject, version}}, servers: [...]}``, read from one of the config's
catalogs (``inline``, ``filesystem`` or a registry; a registry is asked once, at start-up).
Every problem names where it is: the YAML path of the spec entry for a missing file or
subject, and the YAML path followed by the JSON pointer for a problem inside the document
(``bindings.api.options.specs.events: /channels/events/address: ...``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ssegate.asyncapi.document import AsyncApiError, load_document
from ssegate.asyncapi.model import Api, ApiChannel, ApiServer, read_api
from ssegate.catalogs import CatalogError, SchemaRef, build_catalog
from ssegate.config.errors import ConfigError
from ssegate.config.model import Component
from ssegate.config.yaml_reader import read_text


@dataclass(frozen=True, slots=True)
class Spec:
    """One entry of ``options.specs``: its label, its reading and the servers it selects."""

    label: str
    api: Api
    where: str
    """YAML path of the entry, ``bindings.api.options.specs.events``."""
    server_filters: list[dict[str, Any]] = field(default_factory=list)

    def fail(self, exc: AsyncApiError) -> ConfigError:
        return ConfigError(self.where, str(exc))

    def error(self, at: str, message: str) -> ConfigError:
        return ConfigError(self.where, f"{at}: {message}")

    def require_path(self, channel: ApiChannel) -> None:
        """Refuse a channel whose address is not a request path."""
        if not channel.address.startswith("/"):
            raise self.error(
                channel.address_at,
                f"{channel.address!r} is not a path: an SSE channel address starts with '/'",
            )

    def servers(self) -> list[ApiServer]:
        """The document's servers, narrowed by ``servers[]{name, url, host, pathname}``."""
        if not self.server_filters:
            return list(self.api.servers)
        chosen = [s for s in self.api.servers if any(_matches(s, f) for f in self.server_filters)]
        if not chosen:
            raise ConfigError(f"{self.where}.servers", "selects none of the document's servers")
        return chosen


def _matches(server: ApiServer, wanted: Mapping[str, Any]) -> bool:
    address = f"{server.host}:{server.port}" if server.port else server.host
    checks = {
        "name": server.name,
        "host": address,
        "url": address,
        "pathname": server.pathname or "/",
    }
    return all(str(value) == checks.get(key) for key, value in wanted.items())


def load_specs(
    binding: str,
    options: Mapping[str, Any],
    catalogs: Mapping[str, Mapping[str, Any]],
    base_dir: str,
) -> list[Spec]:
    """Every spec of binding ``binding``, read and checked."""
    specs = []
    for label, entry in (options.get("specs") or {}).items():
        where = f"bindings.{binding}.options.specs.{label}"
        if isinstance(entry, str):
            text, source = _read_file(entry, where, base_dir), entry
            filters: list[dict[str, Any]] = []
        else:
            text, source = _read_catalog(entry["catalog"], where, catalogs, base_dir)
            filters = list(entry.get("servers") or [])
        try:
            api = read_api(load_document(text, source))
        except AsyncApiError as exc:
            raise ConfigError(where, str(exc)) from None
        specs.append(Spec(label, api, where, filters))
    return specs


def _read_file(path: str, where: str, base_dir: str) -> str:
    location = os.path.join(base_dir, os.path.expanduser(path))
    try:
        return read_text(location, "AsyncAPI document")
    except ConfigError as exc:
        raise ConfigError(where, str(exc)) from None


def _read_catalog(
    refs: Mapping[str, Mapping[str, Any]],
    where: str,
    catalogs: Mapping[str, Mapping[str, Any]],
    base_dir: str,
) -> tuple[str, str]:
    if len(refs) != 1:
        raise ConfigError(f"{where}.catalog", "name exactly one catalog")
    name, ref = next(iter(refs.items()))
    raw = catalogs.get(name)
    if raw is None:
        raise ConfigError(f"{where}.catalog.{name}", f"catalog {name!r} is not defined")
    component = Component(name, raw["type"], dict(raw.get("options") or {}), f"catalogs.{name}")

    def resolve_path(path: str) -> str:
        return os.path.join(base_dir, os.path.expanduser(path))

    try:
        schema = build_catalog(component, resolve_path).resolve(SchemaRef.parse(ref))
    except CatalogError as exc:
        raise ConfigError(f"{where}.catalog.{name}", str(exc)) from None
    return schema.text, f"catalog {name!r} subject {ref.get('subject')!r}"

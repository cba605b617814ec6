"""Finding the AsyncAPI documents an ``asyncapi`` binding names in ``options.specs``.

A spec is either a file path (relative to the config file) or Zilla's
``{catalog: {<catalog>: {subject, version}}, servers: [...]}``, read from one of the config's
catalogs (``inline``, ``filesystem`` or a registry; a registry is asked once, at start-up).
Documents are read by :func:`~ssegate.asyncapi.roles.read_spec`, as ``ssegate asyncapi
validate`` reads them.

``servers`` narrows the document's servers, in both of Zilla's spellings:

- objects ``{name, url, host, pathname}``: the servers whose every given field matches
  (``url`` and ``host`` compare the ``host:port``, a scheme in ``url`` left aside);
- URL strings (``'http://localhost:7114'``; current Zilla, also as a single ``server:``): the
  servers at that host, port (and path, if the URL has one). When the document has none there,
  the URL moves the servers of its scheme (``http`` also takes ``sse`` ones, ``https``
  ``secure-sse``) to that address, keeping their names and security: Zilla's examples point
  their client at the upstream this way (``http://${{env.SSE_SERVER_HOST}}:...``). A document
  without servers takes the URL as its one server.
Every problem names where it is: the YAML path of the spec entry for a missing file or
subject, and the YAML path followed by the JSON pointer for a problem inside the document
(``bindings.api.options.specs.events: /channels/events/address: ...``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from ssegate.asyncapi.document import AsyncApiError
from ssegate.asyncapi.model import Api, ApiChannel, ApiServer
from ssegate.asyncapi.roles import read_spec
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
    server_filters: list[dict[str, Any] | str] = field(default_factory=list)
    servers_key: str = "servers"
    """``servers`` or Zilla's single ``server``, for messages."""

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
        """The document's servers, narrowed by the entry's ``servers`` (see the module)."""
        if not self.server_filters:
            return list(self.api.servers)
        chosen: list[ApiServer] = []
        for index, wanted in enumerate(self.server_filters):
            if isinstance(wanted, str):
                one = self.servers_key == "server"
                at = f"{self.where}.server" if one else f"{self.where}.servers[{index}]"
                found = self._at_url(wanted, at)
            else:
                found = [s for s in self.api.servers if _matches(s, wanted)]
            chosen.extend(s for s in found if s not in chosen)
        if not chosen:
            raise ConfigError(
                f"{self.where}.{self.servers_key}", "selects none of the document's servers"
            )
        return chosen

    def _at_url(self, url: str, where: str) -> list[ApiServer]:
        parts = urlsplit(url if "://" in url else f"//{url}")
        try:
            host, port = (parts.hostname or "").lower(), parts.port
        except ValueError:
            raise ConfigError(
                where, f"{url!r}: the port must be a number from 1 to 65535"
            ) from None
        if not host:
            raise ConfigError(where, f"{url!r} is not a server URL (http://host:port)")
        pathname = parts.path.rstrip("/")
        at_address = [
            s
            for s in self.api.servers
            if s.host.lower() == host
            and s.port == port
            and (not pathname or s.pathname == pathname)
        ]
        if at_address:
            return at_address
        moved = _SCHEME_PROTOCOLS.get(parts.scheme, (parts.scheme,))
        same_protocol = [s for s in self.api.servers if s.protocol in moved]
        if self.api.servers and not same_protocol:
            return []
        if not same_protocol:
            return [ApiServer(url, parts.scheme or "http", host, port, pathname, (), "/servers")]
        return [
            replace(s, host=host, port=port, pathname=pathname or s.pathname) for s in same_protocol
        ]


_SCHEME_PROTOCOLS = {"http": ("http", "sse"), "https": ("https", "secure-sse")}
"""The server protocols a URL scheme stands for."""


def _matches(server: ApiServer, wanted: Mapping[str, Any]) -> bool:
    address = f"{server.host}:{server.port}" if server.port else server.host
    checks = {
        "name": server.name,
        "host": address,
        "url": address,
        "pathname": server.pathname or "/",
    }
    return all(_without_scheme(key, value) == checks.get(key) for key, value in wanted.items())


def _without_scheme(key: str, value: Any) -> str:
    text = str(value)
    return text.split("://", 1)[1].rstrip("/") if key == "url" and "://" in text else text


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
        key = "servers"
        if isinstance(entry, str):
            text, source = _read_file(entry, where, base_dir), entry
            filters: list[dict[str, Any] | str] = []
        else:
            if "server" in entry and "servers" in entry:
                raise ConfigError(f"{where}.server", "give servers or server, not both")
            text, source = _read_catalog(entry["catalog"], where, catalogs, base_dir)
            filters = list(entry.get("servers") or [])
            if "server" in entry:
                key, filters = "server", [entry["server"]]
        try:
            api = read_spec(text, source)
        except AsyncApiError as exc:
            raise ConfigError(where, str(exc)) from None
        specs.append(Spec(label, api, where, filters, key))
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

"""The registry catalogs: ``schema-registry``/``karapace`` (Confluent's REST API) and ``apicurio``.

Each catalog turns a :class:`~ssegate.catalogs.schema.SchemaRef` into one or two GETs, reads
the answer into a :class:`~ssegate.catalogs.schema.Schema`, and keeps it in a
:class:`~ssegate.catalogs.cache.SchemaCache`. The request paths and answer parsing are pure; the
only I/O is :data:`Fetch`, a blocking GET with a timeout (:func:`http_get` by default). Lookups
are synchronous: at start-up they resolve what the config names, and later a schema id that a
message carries and nothing has cached yet costs one bounded GET, once.

Confluent API: ``GET /schemas/ids/{id}``, ``GET /subjects/{subject}/versions/{version}``; a
``context`` other than ``default`` qualifies subjects as ``:.<context>:<subject>``.
Apicurio (its v2 REST API, which Apicurio 2 and 3 both serve): ``GET /ids/globalIds/{id}`` or
``/ids/contentIds/{id}`` (``use-id``), ``GET /groups/{group}/artifacts/{subject}/versions/
{version}/meta`` then the content by the id it names.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from ssegate.catalogs.cache import DEFAULT_MAX_AGE, SchemaCache
from ssegate.catalogs.schema import (
    LATEST,
    CatalogUnavailable,
    Schema,
    SchemaRef,
    UnknownSchema,
    guess_type,
)
from ssegate.telemetry import log

DEFAULT_TIMEOUT = 3.0
APICURIO_API = "/apis/registry/v2"

Fetch = Callable[[str], tuple[int, bytes]]
"""GET ``url`` → ``(status, body)``; raises ``OSError`` when the server cannot be reached."""


def http_get(url: str, timeout: float = DEFAULT_TIMEOUT) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"accept": "application/json, */*"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return int(response.status), bytes(response.read())
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read() or b""


class RegistryCatalog:
    """What both registry APIs share: the cache, the lock, the fetch and its error mapping."""

    def __init__(self, name: str, url: str, max_age: float, fetch: Fetch | None) -> None:
        self.name = name
        self.url = url.rstrip("/")
        self.cache = SchemaCache(max_age)
        self._fetch = fetch
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def resolve(self, ref: SchemaRef) -> Schema:
        if ref.id is not None:
            return self.by_id(ref.id)
        subject = str(ref.subject)
        with self._lock:
            return self.cache.by_version(
                subject, ref.version, lambda: self.fetch_version(subject, ref.version)
            )

    def by_id(self, schema_id: int) -> Schema:
        with self._lock:
            return self.cache.by_id(schema_id, lambda: self.fetch_id(schema_id))

    def fetch_id(self, schema_id: int) -> Schema:
        raise NotImplementedError

    def fetch_version(self, subject: str, version: str) -> Schema:
        raise NotImplementedError

    def get(self, path: str, what: str) -> bytes:
        """GET ``url + path``: the body of a 2xx, else UnknownSchema (404) or
        CatalogUnavailable (no answer, 5xx, other statuses)."""
        url = self.url + path
        try:
            status, body = (self._fetch or http_get)(url)
        except OSError as exc:
            reason = f"catalog '{self.name}' cannot reach {self.url}: {exc}"
            log.warning("catalog.unavailable", catalog=self.name, url=url, error=str(exc))
            raise CatalogUnavailable(reason) from None
        if 200 <= status < 300:
            log.event("catalog.fetched", catalog=self.name, url=url)
            return body
        if status == 404:
            raise UnknownSchema(f"catalog '{self.name}' has no {what}")
        detail = body[:200].decode("utf-8", "replace")
        log.warning("catalog.unavailable", catalog=self.name, url=url, status=status)
        raise CatalogUnavailable(
            f"catalog '{self.name}' answered {status} for {what}: {detail}".rstrip(": ")
        )


class ConfluentCatalog(RegistryCatalog):
    """``schema-registry`` and ``karapace``: the Confluent Schema Registry REST API."""

    def __init__(
        self,
        name: str,
        url: str,
        *,
        context: str | None = None,
        max_age: float = DEFAULT_MAX_AGE,
        fetch: Fetch | None = None,
    ) -> None:
        super().__init__(name, url, max_age, fetch)
        self.context = None if context in (None, "", "default") else context

    def qualified(self, subject: str) -> str:
        return f":.{self.context}:{subject}" if self.context else subject

    def fetch_id(self, schema_id: int) -> Schema:
        path = f"/schemas/ids/{schema_id}"
        if self.context:
            path += "?" + urllib.parse.urlencode({"subject": f":.{self.context}:"})
        answer = _json(self.get(path, f"schema with id {schema_id}"), self.name)
        return Schema(schema_id, str(answer["schema"]), str(answer.get("schemaType", "AVRO")))

    def fetch_version(self, subject: str, version: str) -> Schema:
        quoted = urllib.parse.quote(self.qualified(subject), safe="")
        path = f"/subjects/{quoted}/versions/{urllib.parse.quote(version, safe='')}"
        answer = _json(self.get(path, f"subject '{subject}' version {version}"), self.name)
        return Schema(
            int(answer["id"]),
            str(answer["schema"]),
            str(answer.get("schemaType", "AVRO")),
            subject,
            int(answer["version"]),
        )


class ApicurioCatalog(RegistryCatalog):
    """``apicurio``: Apicurio Registry's own REST API (subjects are artifact ids)."""

    def __init__(
        self,
        name: str,
        url: str,
        *,
        group_id: str = "default",
        use_id: str = "globalId",
        max_age: float = DEFAULT_MAX_AGE,
        fetch: Fetch | None = None,
    ) -> None:
        base = url.rstrip("/")
        if "/apis/registry/" not in base:
            base += APICURIO_API
        super().__init__(name, base, max_age, fetch)
        self.group_id = group_id
        self.use_id = use_id

    def fetch_id(self, schema_id: int) -> Schema:
        kind = "contentIds" if self.use_id == "contentId" else "globalIds"
        text = self.get(f"/ids/{kind}/{schema_id}", f"schema with {self.use_id} {schema_id}")
        decoded = text.decode("utf-8", "replace")
        return Schema(schema_id, decoded, guess_type(decoded))

    def fetch_version(self, subject: str, version: str) -> Schema:
        group = urllib.parse.quote(self.group_id, safe="")
        artifact = urllib.parse.quote(subject, safe="")
        base = f"/groups/{group}/artifacts/{artifact}"
        meta_path = f"{base}/meta" if version == LATEST else f"{base}/versions/{version}/meta"
        meta = _json(self.get(meta_path, f"artifact '{subject}' version {version}"), self.name)
        schema_id = int(meta["contentId" if self.use_id == "contentId" else "globalId"])
        with_id = self.fetch_id(schema_id)
        return Schema(
            schema_id,
            with_id.text,
            _apicurio_type(meta.get("type"), with_id.text),
            subject,
            _int_or_none(meta.get("version")),
        )


def build_registry(
    name: str, kind: str, options: Mapping[str, Any], fetch: Fetch | None = None
) -> RegistryCatalog:
    max_age = float(options.get("max-age", DEFAULT_MAX_AGE))
    if kind == "apicurio":
        return ApicurioCatalog(
            name,
            str(options["url"]),
            group_id=str(options.get("group-id", "default")),
            use_id=str(options.get("use-id", "globalId")),
            max_age=max_age,
            fetch=fetch,
        )
    return ConfluentCatalog(
        name, str(options["url"]), context=options.get("context"), max_age=max_age, fetch=fetch
    )


def _json(body: bytes, catalog: str) -> dict[str, Any]:
    try:
        answer = json.loads(body)
    except ValueError:
        raise CatalogUnavailable(f"catalog '{catalog}' answered with something not JSON") from None
    if not isinstance(answer, dict):
        raise CatalogUnavailable(
            f"catalog '{catalog}' answered with a JSON {type(answer).__name__}"
        )
    return answer


def _apicurio_type(kind: Any, text: str) -> str:
    names = {"AVRO": "AVRO", "JSON": "JSON", "PROTOBUF": "PROTOBUF"}
    return names.get(str(kind).upper(), guess_type(text))


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None

"""The rules for keeping what a registry answered, separate from how it is asked.

:class:`SchemaCache` is pure and synchronous (the clock is injected):

- A schema looked up by id, or by subject and a numbered version, never changes: it is kept for
  the life of the process.
- ``latest`` of a subject is kept ``max-age`` seconds; after that the next lookup asks again.
  When asking again fails because the registry is unavailable, the stale copy is still used
  (a registry that goes away leaves cached schemas working).
- An id the registry said it does not know is remembered as unknown for ``max-age`` seconds, so
  a stream of messages naming it does not ask the registry once per message.
- After the registry was found unavailable, it is not asked again for ``retry_after`` seconds;
  lookups that have nothing cached fail fast with the remembered reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ssegate.catalogs.schema import LATEST, CatalogUnavailable, Schema, UnknownSchema

DEFAULT_MAX_AGE = 300.0
DEFAULT_RETRY_AFTER = 5.0


@dataclass(slots=True)
class _Entry:
    schema: Schema
    expires: float


class SchemaCache:
    def __init__(
        self,
        max_age: float = DEFAULT_MAX_AGE,
        retry_after: float = DEFAULT_RETRY_AFTER,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_age = max_age
        self.retry_after = retry_after
        self.clock = clock
        self._by_id: dict[int, Schema] = {}
        self._by_version: dict[tuple[str, str], _Entry] = {}
        self._unknown_ids: dict[int, tuple[float, str]] = {}
        self._down_until = 0.0
        self._down_reason = ""

    # -- by id ------------------------------------------------------------------------------

    def by_id(self, schema_id: int, fetch: Callable[[], Schema]) -> Schema:
        schema = self._by_id.get(schema_id)
        if schema is not None:
            return schema
        unknown = self._unknown_ids.get(schema_id)
        now = self.clock()
        if unknown is not None and unknown[0] > now:
            raise UnknownSchema(unknown[1])
        schema = self._ask(fetch, on_unknown=lambda reason: self._forget_id(schema_id, reason))
        self.store(schema)
        return schema

    def _forget_id(self, schema_id: int, reason: str) -> None:
        self._unknown_ids[schema_id] = (self.clock() + self.max_age, reason)

    # -- by subject and version ---------------------------------------------------------------

    def by_version(self, subject: str, version: str, fetch: Callable[[], Schema]) -> Schema:
        key = (subject, version)
        entry = self._by_version.get(key)
        now = self.clock()
        if entry is not None and entry.expires > now:
            return entry.schema
        try:
            schema = self._ask(fetch)
        except CatalogUnavailable:
            if entry is not None:
                return entry.schema  # stale, but the registry is away: keep working
            raise
        self.store(schema)
        expires = now + self.max_age if version == LATEST else float("inf")
        self._by_version[key] = _Entry(schema, expires)
        return schema

    # -- shared -------------------------------------------------------------------------------

    def store(self, schema: Schema) -> None:
        self._by_id.setdefault(schema.id, schema)
        self._unknown_ids.pop(schema.id, None)

    def cached_ids(self) -> list[int]:
        return sorted(self._by_id)

    def _ask(
        self, fetch: Callable[[], Schema], on_unknown: Callable[[str], None] | None = None
    ) -> Schema:
        now = self.clock()
        if self._down_until > now:
            raise CatalogUnavailable(self._down_reason)
        try:
            schema = fetch()
        except CatalogUnavailable as exc:
            self._down_until = now + self.retry_after
            self._down_reason = str(exc)
            raise
        except UnknownSchema as exc:
            if on_unknown is not None:
                on_unknown(str(exc))
            raise
        self._down_until = 0.0
        return schema

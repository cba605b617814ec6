"""Where an http server finds a guard's credentials: ``options.authorization.<guard>.credentials``.

Each of ``cookies``, ``headers`` and ``query`` maps one name to a pattern holding
``{credentials}`` (``authorization: Bearer {credentials}``, ``access_token: "{credentials}"``).
They are looked up in Zilla's order, cookie, then header, then query; the first one present
whose value fits its pattern gives the credentials. A value that does not fit (``Basic ...``
where ``Bearer {credentials}`` is expected) counts as absent. Header prefixes compare without
regard to case (``bearer`` works as ``Bearer``). :meth:`CredentialsLookup.hint` says the same to
a client that sent none: ``"Authorization: Bearer <token>" or ?access_token=<token>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from http.cookies import CookieError, SimpleCookie
from typing import Any

from ssegate.config.errors import ConfigError
from ssegate.contract.exchange import Request

PLACEHOLDER = "{credentials}"


@dataclass(frozen=True, slots=True)
class _Template:
    name: str
    prefix: str
    suffix: str

    @classmethod
    def parse(
        cls, entries: Mapping[str, str] | None, path: str, *, lower_name: bool
    ) -> _Template | None:
        if entries is None:
            return None
        # The schema maps exactly one name to a pattern holding {credentials}; not twice, here.
        ((name, pattern),) = entries.items()
        if pattern.count(PLACEHOLDER) != 1:
            raise ConfigError(f"{path}.{name}", "the pattern must hold {credentials} once")
        prefix, _, suffix = pattern.partition(PLACEHOLDER)
        return cls(str(name).lower() if lower_name else str(name), prefix, suffix)

    def extract(self, value: str | None, *, fold_case: bool = False) -> str | None:
        if value is None:
            return None
        value = value.strip()
        head = value[: len(self.prefix)]
        if (head.lower() != self.prefix.lower()) if fold_case else (head != self.prefix):
            return None
        if not value.endswith(self.suffix):
            return None
        found = value[len(self.prefix) : len(value) - len(self.suffix)].strip()
        return found or None

    def shown(self) -> str:
        """The pattern with ``<token>`` in place of ``{credentials}``."""
        return f"{self.prefix}<token>{self.suffix}"


@dataclass(frozen=True, slots=True)
class CredentialsLookup:
    """One guard's credential sources, compiled once."""

    cookie: _Template | None
    header: _Template | None
    query: _Template | None

    @classmethod
    def from_options(cls, options: Mapping[str, Any], path: str) -> CredentialsLookup:
        """One entry of ``options.authorization``: the schema requires a ``credentials`` that
        names at least one of ``cookies``, ``headers`` and ``query``."""
        credentials = options["credentials"]
        where = f"{path}.credentials"
        return cls(
            cookie=_Template.parse(
                credentials.get("cookies"), f"{where}.cookies", lower_name=False
            ),
            header=_Template.parse(credentials.get("headers"), f"{where}.headers", lower_name=True),
            query=_Template.parse(credentials.get("query"), f"{where}.query", lower_name=False),
        )

    def hint(self) -> str:
        """How a client presents credentials here, for refusals: header, then query, then cookie."""
        ways = []
        if self.header is not None:
            name = "-".join(part.capitalize() for part in self.header.name.split("-"))
            ways.append(f'"{name}: {self.header.shown()}"')
        if self.query is not None:
            ways.append(f"?{self.query.name}={self.query.shown()}")
        if self.cookie is not None:
            ways.append(f'the cookie "{self.cookie.name}={self.cookie.shown()}"')
        return " or ".join(ways)

    def find(self, request: Request) -> str | None:
        """The credentials ``request`` carries for this guard, or ``None``."""
        if self.cookie is not None:
            found = self.cookie.extract(_cookie(request, self.cookie.name))
            if found is not None:
                return found
        if self.header is not None:
            value = request.headers.get(self.header.name)
            found = self.header.extract(value, fold_case=True)
            if found is not None:
                return found
        if self.query is not None:
            return self.query.extract(request.query_param(self.query.name))
        return None


def _cookie(request: Request, name: str) -> str | None:
    header = request.headers.get("cookie")
    if not header or name not in header:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except CookieError:
        return None
    morsel = jar.get(name)
    return None if morsel is None else morsel.value

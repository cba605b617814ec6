"""``options.requests`` of the http server: which requests a rule applies to, and what it checks.

A rule (one entry of ``requests[]``) applies to a request when all its selectors agree:

- ``path``: a pattern with ``{name}`` holes, matched against the request path with its query
  string removed. Each hole captures one or more characters (``/`` included), the shortest that
  lets the rest match, and one trailing ``/`` on the request is allowed, as in Zilla: with
  ``/items/{id}``, ``/items/42`` and ``/items/42/`` both give ``id='42'``. Names are letters,
  digits, ``_`` and ``-``; everything else in the pattern is literal text.
- ``method``, when given, equals the request method.
- ``content-type``, when given, lists the media type of the request's ``content-type`` header
  (compared without parameters such as ``charset``, case-insensitively). A request without a
  ``content-type`` is not excluded by it, as in Zilla.

Rules are tried in order and only the first that applies is used. Its checks, in this order,
the first failure being the answer:

- ``headers: {name: model}``: the header's value, as received (repeated headers joined with
  ``, ``). ``:authority``, ``:scheme``, ``:method`` and ``:path`` read the request line.
- ``params.path: {name: model}``: the ``{name}`` capture, percent-decoded. Naming a parameter
  the rule's ``path`` does not capture is a config error.
- ``params.query: {name: model}``: every value of that query parameter, URL-decoded (``%XX``
  and ``+``).
- ``content: model``: the request body. It is checked whatever its length, empty included.

**Required-ness.** A header or parameter that a rule names is required: a request that lacks it
is invalid ("is missing"). Zilla checks only the values that are present; ssegate refuses the
request instead, so a rule states what a valid request carries.

Models are built once, when the config is compiled, by :func:`ssegate.models.build_model` (a
bad one stops start-up with its config path). Values reach their model's ``validate`` as the
bytes the client sent (headers and the target are read back as Latin-1, which gives them byte
for byte). A failed check is a :class:`RequestProblem`: the status to answer (400, or 413 for
a body over :data:`MAX_CONTENT_BYTES`), what failed and why, and the config path of the check.
``responses[]`` is not checked yet: a rule that has one is refused with ``NotSupportedYet``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_to_bytes

from ssegate.bindings.http.routing import header_value
from ssegate.catalogs import CatalogSet
from ssegate.config.errors import ConfigError, NotSupportedYet
from ssegate.config.validate import yaml_path
from ssegate.contract.exchange import Request
from ssegate.models import Model, build_model

MAX_CONTENT_BYTES = 1 << 20
"""A body a ``content`` rule has to check may be this large; a larger one is answered 413."""

_PARAM = re.compile(r"\{([A-Za-z0-9_-]+)\}")
_PSEUDO_HEADERS = (":authority", ":scheme", ":method", ":path")


@dataclass(frozen=True, slots=True)
class RequestProblem:
    """Why a request is refused: ``status``, what failed (``subject``), why, and which rule."""

    status: int
    subject: str
    """What failed: ``query parameter 'limit'``, ``header 'x-tenant'``, ``content``."""
    reason: str
    rule: str
    """Config path of the failed check: ``bindings.<name>.options.requests[0].headers.x-id``."""

    def __str__(self) -> str:
        return f"{self.subject}: {self.reason}"

    @property
    def message(self) -> str:
        """One line for the response body: what failed, why, and the rule's config path."""
        return f"invalid request: {self} ({self.rule})"


class RequestPath:
    """A rule's ``path``, compiled once (see the module docstring for its rules)."""

    __slots__ = ("_regex", "params", "text")

    def __init__(self, text: str, where: str) -> None:
        parts: list[str] = []
        params: list[str] = []
        position = 0
        for hole in _PARAM.finditer(text):
            parts.append(_literal(text[position : hole.start()], text, where))
            name = hole.group(1)
            if name in params:
                raise ConfigError(where, f"parameter '{name}' appears twice in path '{text}'")
            params.append(name)
            parts.append("(.+?)")
            position = hole.end()
        parts.append(_literal(text[position:], text, where))
        self.text = text
        self.params = tuple(params)
        """Names of the ``{name}`` captures, in order."""
        self._regex = re.compile("".join(parts) + "/?", re.DOTALL)

    def match(self, path: str) -> dict[str, str] | None:
        """The captures when ``path`` (no query string) matches, else ``None``."""
        found = self._regex.fullmatch(path)
        return None if found is None else dict(zip(self.params, found.groups(), strict=True))


def _literal(piece: str, text: str, where: str) -> str:
    if "{" in piece or "}" in piece:
        raise ConfigError(
            where, f"path '{text}': a '{{name}}' holds letters, digits, '_' and '-' only"
        )
    return re.escape(piece)


@dataclass(frozen=True, slots=True)
class _Check:
    """One named value a rule checks against a model."""

    name: str
    model: Model
    rule: str


class RequestRule:
    """One entry of ``requests[]``: its selectors and its checks."""

    def __init__(self, entry: Mapping[str, Any], where: str, catalogs: CatalogSet | None) -> None:
        # The schema has checked the rule's keys and their types, and the method's name.
        if entry.get("responses"):
            raise NotSupportedYet(f"{where}.responses", "response validation is not supported yet")
        self.where = where
        path = entry["path"]
        if not path:
            raise ConfigError(f"{where}.path", "required: the request path pattern")
        self.path = RequestPath(path, f"{where}.path")
        self.method: str | None = entry.get("method")
        self.content_types = _content_types(entry.get("content-type"))
        self.headers = [
            _Check(name.lower(), model, rule)
            for name, model, rule in _models(entry.get("headers"), f"{where}.headers", catalogs)
        ]
        for check in self.headers:
            if check.name.startswith(":") and check.name not in _PSEUDO_HEADERS:
                raise ConfigError(
                    check.rule, f"unknown pseudo-header; use one of {', '.join(_PSEUDO_HEADERS)}"
                )
        params = entry.get("params") or {}
        self.path_params = [
            _Check(name, model, rule)
            for name, model, rule in _models(params.get("path"), f"{where}.params.path", catalogs)
        ]
        for check in self.path_params:
            if check.name not in self.path.params:
                raise ConfigError(
                    check.rule, f"'{check.name}' is not a parameter of path '{self.path.text}'"
                )
        self.query_params = [
            _Check(name, model, rule)
            for name, model, rule in _models(params.get("query"), f"{where}.params.query", catalogs)
        ]
        content = entry.get("content")
        self.content: Model | None = None
        if content is not None:
            self.content = build_model(content, f"{where}.content", catalogs)

    def applies(self, request: Request) -> dict[str, str] | None:
        """The path captures when this rule applies to ``request``, else ``None``."""
        if self.method is not None and request.method != self.method:
            return None
        if self.content_types is not None:
            content_type = request.headers.get("content-type")
            if content_type is not None and _media_type(content_type) not in self.content_types:
                return None
        return self.path.match(request.path)

    def check(
        self, request: Request, body: bytes, captures: dict[str, str]
    ) -> RequestProblem | None:
        """The first check ``request`` fails, or ``None`` when it passes them all."""
        return (
            self._check_headers(request)
            or self._check_path_params(captures)
            or self._check_query_params(request)
            or self._check_content(body)
        )

    def _check_headers(self, request: Request) -> RequestProblem | None:
        for check in self.headers:
            subject = f"header '{check.name}'"
            text = _header(request, check.name)
            if text is None:
                return RequestProblem(400, subject, "is missing", check.rule)
            problem = _validate(check, subject, text.encode("latin-1", "replace"))
            if problem is not None:
                return problem
        return None

    def _check_path_params(self, captures: dict[str, str]) -> RequestProblem | None:
        for check in self.path_params:
            raw = captures[check.name].encode("latin-1", "replace")
            problem = _validate(check, f"path parameter '{check.name}'", unquote_to_bytes(raw))
            if problem is not None:
                return problem
        return None

    def _check_query_params(self, request: Request) -> RequestProblem | None:
        if not self.query_params:
            return None
        query = _query_values(request.query)
        for check in self.query_params:
            subject = f"query parameter '{check.name}'"
            values = query.get(check.name)
            if not values:
                return RequestProblem(400, subject, "is missing", check.rule)
            for value in values:
                problem = _validate(check, subject, value)
                if problem is not None:
                    return problem
        return None

    def _check_content(self, body: bytes) -> RequestProblem | None:
        if self.content is None:
            return None
        rule = f"{self.where}.content"
        if len(body) > MAX_CONTENT_BYTES:
            too_large = f"{len(body)} bytes, more than the {MAX_CONTENT_BYTES} a rule checks"
            return RequestProblem(413, "content", too_large, rule)
        reason = self.content.validate(body)
        return None if reason is None else RequestProblem(400, "content", reason, rule)


class RequestRules:
    """An http server's ``requests[]``, compiled once at start-up."""

    def __init__(self, rules: list[RequestRule]) -> None:
        self.rules = rules

    @classmethod
    def compile(
        cls, entries: list[Mapping[str, Any]], where: str, catalogs: CatalogSet | None
    ) -> RequestRules:
        """Compile ``options.requests`` found at ``where``. Raises ConfigError (or
        NotSupportedYet) naming the path of what is wrong."""
        return cls(
            [RequestRule(entry, f"{where}[{i}]", catalogs) for i, entry in enumerate(entries)]
        )

    def rule_for(self, request: Request) -> tuple[RequestRule, dict[str, str]] | None:
        """The first rule that applies to ``request`` and its path captures, or ``None``."""
        for rule in self.rules:
            captures = rule.applies(request)
            if captures is not None:
                return rule, captures
        return None

    def check(self, request: Request, body: bytes = b"") -> RequestProblem | None:
        """Why ``request`` (with its complete ``body``) is invalid, or ``None``: valid, or no
        rule applies."""
        found = self.rule_for(request)
        if found is None:
            return None
        rule, captures = found
        return rule.check(request, body, captures)


def _models(
    value: Mapping[str, Any] | None, where: str, catalogs: CatalogSet | None
) -> list[tuple[str, Model, str]]:
    """``{name: model}`` → ``(name, built model, config path)`` for each entry."""
    if value is None:
        return []
    built = []
    for name, spec in value.items():
        rule = _member(where, str(name))
        if not isinstance(name, str) or not name:  # YAML keys may be numbers, or empty
            raise ConfigError(rule, "a name must be a non-empty string")
        built.append((name, build_model(spec, rule, catalogs), rule))
    return built


def _content_types(value: list[str] | None) -> frozenset[str] | None:
    if value is None:
        return None
    return frozenset(_media_type(item) for item in value)


def _member(where: str, key: str) -> str:
    """``where`` + ``.key``, or ``['key']`` for a key that needs quoting."""
    suffix = yaml_path([key])
    return f"{where}{suffix}" if suffix.startswith("[") else f"{where}.{suffix}"


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def _header(request: Request, name: str) -> str | None:
    """As the routes read a header, except that ``:path`` keeps its query string here."""
    return request.target if name == ":path" else header_value(request, name)


def _query_values(query: str) -> dict[str, list[bytes]]:
    """Query parameter name → its values, URL-decoded to the bytes the client meant."""
    values: dict[str, list[bytes]] = {}
    for pair in query.encode("latin-1", "replace").split(b"&"):
        if not pair:
            continue
        raw_name, _, raw_value = pair.partition(b"=")
        name = unquote_to_bytes(raw_name.replace(b"+", b" ")).decode("utf-8", "replace")
        values.setdefault(name, []).append(unquote_to_bytes(raw_value.replace(b"+", b" ")))
    return values


def _validate(check: _Check, subject: str, value: bytes) -> RequestProblem | None:
    reason = check.model.validate(value)
    return None if reason is None else RequestProblem(400, subject, reason, check.rule)

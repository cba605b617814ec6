"""The ``http-filesystem`` proxy binding: maps a request path to a file path.

Routes are ``when[]{path}`` and ``with{path}``, for example ``when: [{path: /{path}}]``
with ``with: {path: ${params.path}}``: ``/css/app.css`` becomes ``css/app.css``. The path
pattern is matched against the request path without its query string (see
:mod:`ssegate.bindings.http.routing` for the pattern rules); the first matching route wins and
its exit, a ``filesystem`` server, serves the rendered path. A route without ``with`` serves
the request path with its leading ``/`` dropped. No matching route is answered 404.

``/`` itself: as in Zilla, ``/{path}`` does not match ``/`` (a parameter needs at least one
character), so ``/`` is 404 unless a route names it, e.g. ``when: [{path: /}]`` with
``with: {path: index.html}``. A rendered path that is empty or ends in ``/`` is served as that
directory's ``index.html`` by the filesystem server (Zilla would list the directory; ssegate
never lists directories).

Parameters the http server's routes captured (``request.params``) are available to ``with``
as well; this binding's own captures take precedence.

A route with ``guarded`` is passed over when its guards do not accept the request (role
expressions evaluated, :mod:`ssegate.guards.guarded`); when routes matched and only their
guards refused, the answer is the first refusal, 401 or 403 (:mod:`ssegate.guards`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ssegate.bindings.http.routing import Pattern, first_match
from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding, Route
from ssegate.contract.exchange import Request, ResponseStream, simple_response
from ssegate.contract.guard import Guard
from ssegate.engine.context import BuildContext, ExitKind
from ssegate.engine.templates import MissingTemplateValue, Template
from ssegate.guards import Refusal, answer_refusal
from ssegate.guards.guarded import Guarded
from ssegate.telemetry import log
from ssegate.telemetry.metrics import Metrics


@runtime_checkable
class FileServer(Protocol):
    """What an http-filesystem route exits to (a ``filesystem`` server)."""

    def serve(self, rel_path: str, request: Request, stream: ResponseStream) -> None: ...


FILE_SERVER: ExitKind[FileServer] = ExitKind(FileServer, "a filesystem server")


@dataclass(frozen=True, slots=True)
class _Condition:
    path: Pattern | None

    def match(self, request: Request) -> dict[str, str] | None:
        if self.path is None:
            return {}
        return self.path.match(request.path)


@dataclass(frozen=True, slots=True)
class FilesystemRoute:
    conditions: tuple[_Condition, ...]
    path: Template | None
    exit: FileServer
    yaml_path: str
    guarded: Guarded = field(default_factory=Guarded)

    def match(self, request: Request) -> dict[str, str] | None:
        return first_match(self.conditions, request)


class HttpFilesystemProxy:
    """Picks a route by path and hands the mapped file path to the filesystem server."""

    def __init__(
        self,
        name: str,
        routes: list[FilesystemRoute],
        metrics: Metrics | None = None,
        guards: Mapping[str, Guard] | None = None,
    ) -> None:
        self.name = name
        self.routes = routes
        self.metrics = metrics or Metrics()
        self.guards = guards or {}
        """The built guards of the guarded routes, by name."""

    def handle(self, request: Request, body: bytes, stream: ResponseStream) -> None:
        refusal: Refusal | None = None
        for route in self.routes:
            params = route.match(request)
            if params is None:
                continue
            refused = route.guarded.check(request, self.guards)
            if refused is None:
                break
            refusal = refusal or refused
        else:
            if refusal is not None:
                answer_refusal(stream, refusal, binding=self.name, request=request)
            else:
                self._not_found(request, stream, "no route")
            return
        if route.path is None:
            path = request.path
            rel_path = path[1:] if path.startswith("/") else path
        else:
            try:
                rel_path = route.path.render({**request.params, **params}, request.identities)
            except MissingTemplateValue as missing:
                self._not_found(request, stream, str(missing))
                return
        route.exit.serve(rel_path, request, stream)

    def _not_found(self, request: Request, stream: ResponseStream, reason: str) -> None:
        self.metrics.inc("ssegate.http_filesystem.unrouted", self.name)
        log.event("http_filesystem.not_found", binding=self.name, path=request.path, reason=reason)
        simple_response(stream, 404)


def _compile_condition(entry: Mapping[str, Any], path: str) -> _Condition:
    # The schema's ``when`` of an http-filesystem route holds a string ``path``, nothing else.
    pattern = entry.get("path")
    return _Condition(Pattern.compile(pattern, f"{path}.path") if pattern is not None else None)


def _compile_route(route: Route, path: str, ctx: BuildContext) -> FilesystemRoute:
    conditions = tuple(
        _compile_condition(entry, f"{path}.when[{n}]") for n, entry in enumerate(route.when)
    )
    with_ = route.with_ or {}  # the schema's ``with``: a string ``path``, nothing else
    template: Template | None = None
    if "path" in with_:
        template = Template.compile(with_["path"], f"{path}.with.path")
        captured = {name for c in conditions if c.path is not None for name in c.path.params}
        missing = sorted(template.param_names - captured)
        if missing:
            # It may still come from the http server's route; if not, requests get 404.
            log.warning(
                "http_filesystem.param_not_captured",
                path=f"{path}.with.path",
                params=",".join(missing),
            )
    if not route.exit:
        raise ConfigError(f"{path}.exit", "an http-filesystem route needs an exit")
    exit_ = ctx.exit(route.exit, FILE_SERVER, f"{path}.exit")
    guarded = Guarded.compile(route.guarded, f"{path}.guarded")
    return FilesystemRoute(conditions, template, exit_, path, guarded)


def build(binding: Binding, ctx: BuildContext) -> HttpFilesystemProxy:
    routes = [
        _compile_route(route, route.path or f"{binding.path}.routes[{index}]", ctx)
        for index, route in enumerate(binding.routes)
    ]
    if binding.exit and not any(not r.conditions for r in routes):
        routes.append(_compile_route(Route(exit=binding.exit), f"{binding.path}.exit", ctx))
    if not routes:
        raise ConfigError(f"{binding.path}.routes", "an http-filesystem proxy needs a route")
    guards = {name: ctx.guard(name) for route in routes for name in route.guarded}
    return HttpFilesystemProxy(binding.name, routes, ctx.metrics, guards)

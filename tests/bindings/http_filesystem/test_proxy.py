"""The http-filesystem proxy: request paths mapped to files served by a real filesystem server."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from tests.support.schema_errors import binding_errors

from ssegate.bindings.filesystem.server import FilesystemServer
from ssegate.bindings.http_filesystem.proxy import HttpFilesystemProxy, build
from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding, Config, Route
from ssegate.contract.exchange import DirectSocket, Request
from ssegate.engine.context import ExitKind
from ssegate.telemetry.metrics import Metrics

T = TypeVar("T")


class RecordingStream:
    """Keeps the one response a request gets; every test here fits in one buffer."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.body = bytearray()
        self.ended = False

    def send_headers(
        self, status: int, headers: list[tuple[str, str]], *, end: bool = False
    ) -> None:
        self.status = status
        self.headers = dict(headers)
        self.ended = end

    def send_data(self, data: bytes, *, end: bool = False) -> None:
        self.body += data
        self.ended = end

    def reset(self) -> None:
        self.ended = True

    @property
    def buffered(self) -> int:
        return 0

    @property
    def closed(self) -> bool:
        return self.ended

    def on_close(self, callback: Callable[[], None]) -> None:
        pass

    def on_drain(self, callback: Callable[[], None]) -> None:
        pass

    def direct_socket(self) -> DirectSocket | None:
        return None


class Context:
    """Builds exits on demand the way the runtime does, from a table of bindings."""

    def __init__(self, base: Path) -> None:
        self.metrics = Metrics()
        self.config = Config(name="test", bindings={})
        self.files = FilesystemServer("east_filesystem_server", str(base / "www"))
        self.exits: dict[str, object] = {"east_filesystem_server": self.files, "sse": object()}

    def exit(self, name: str, kind: ExitKind[T], where: str) -> T:
        return kind.require(self.exits[name], where, repr(name))

    def resolve_path(self, path: str) -> str:
        raise AssertionError("not used by the proxy")


@pytest.fixture
def context(tmp_path: Path) -> Context:
    www = tmp_path / "www"
    (www / "css").mkdir(parents=True)
    (www / "index.html").write_text("home\n")
    (www / "css" / "app.css").write_text("p{}\n")
    (www / "docs").mkdir()
    (www / "docs" / "index.html").write_text("docs\n")
    (tmp_path / "secret.txt").write_text("do not serve\n")
    return Context(tmp_path)


def _proxy(context: Context, *routes: Route, exit: str | None = None) -> HttpFilesystemProxy:
    binding = Binding(
        "east_http_filesystem_mapping", "http-filesystem", "proxy", routes=list(routes), exit=exit
    )
    return build(binding, context)  # type: ignore[arg-type]


SEED_ROUTE = Route(
    exit="east_filesystem_server",
    when=[{"path": "/{path}"}],
    with_={"path": "${params.path}"},
    path="bindings.east_http_filesystem_mapping.routes[0]",
)


def _get(proxy: HttpFilesystemProxy, target: str, method: str = "GET") -> RecordingStream:
    stream = RecordingStream()
    proxy.handle(Request(method, "https", "localhost:7143", target, {}), b"", stream)
    return stream


def test_seed_route_maps_the_path_to_the_file(context: Context) -> None:
    proxy = _proxy(context, SEED_ROUTE)
    assert bytes(_get(proxy, "/index.html").body) == b"home\n"
    stream = _get(proxy, "/css/app.css?v=2")
    assert stream.status == 200
    assert bytes(stream.body) == b"p{}\n"
    assert stream.headers["content-type"] == "text/css; charset=utf-8"


def test_root_does_not_match_slash_path_and_is_404_as_in_zilla(context: Context) -> None:
    proxy = _proxy(context, SEED_ROUTE)
    assert _get(proxy, "/").status == 404
    assert (
        proxy.metrics.counter("ssegate.http_filesystem.unrouted", "east_http_filesystem_mapping")
        == 1
    )


def test_a_route_for_root_can_name_the_index_file(context: Context) -> None:
    root = Route(exit="east_filesystem_server", when=[{"path": "/"}], with_={"path": "index.html"})
    proxy = _proxy(context, root, SEED_ROUTE)
    assert bytes(_get(proxy, "/").body) == b"home\n"
    assert bytes(_get(proxy, "/css/app.css").body) == b"p{}\n"


def test_a_directory_path_with_a_trailing_slash_serves_its_index(context: Context) -> None:
    proxy = _proxy(context, SEED_ROUTE)
    assert bytes(_get(proxy, "/docs/").body) == b"docs\n"
    assert _get(proxy, "/docs").status == 404


def test_escape_attempts_through_the_proxy_are_refused(context: Context) -> None:
    proxy = _proxy(context, SEED_ROUTE)
    for target in ("/../secret.txt", "/%2e%2e/secret.txt", "/css/..%2f..%2fsecret.txt"):
        stream = _get(proxy, target)
        assert stream.status == 400
        assert b"do not serve" not in stream.body


def test_no_matching_route_is_404(context: Context) -> None:
    static = Route(
        exit="east_filesystem_server",
        when=[{"path": "/static/{path}"}],
        with_={"path": "css/${params.path}"},
    )
    proxy = _proxy(context, static)
    assert bytes(_get(proxy, "/static/app.css").body) == b"p{}\n"
    assert _get(proxy, "/index.html").status == 404


def test_a_route_without_with_serves_the_request_path(context: Context) -> None:
    proxy = _proxy(context, exit="east_filesystem_server")
    assert bytes(_get(proxy, "/css/app.css").body) == b"p{}\n"


def test_params_captured_upstream_can_be_used(context: Context) -> None:
    route = Route(exit="east_filesystem_server", with_={"path": "css/${params.file}"})
    proxy = _proxy(context, route)
    stream = RecordingStream()
    request = Request("GET", "https", "h", "/x", {}, params={"file": "app.css"})
    proxy.handle(request, b"", stream)
    assert bytes(stream.body) == b"p{}\n"
    assert _get(proxy, "/x").status == 404


def test_an_exit_that_is_not_a_filesystem_server_is_a_config_error(context: Context) -> None:
    bad = Route(exit="sse", when=[{"path": "/{path}"}], path="bindings.m.routes[0]")
    with pytest.raises(ConfigError) as caught:
        _proxy(context, bad)
    assert str(caught.value) == "bindings.m.routes[0].exit: 'sse' is not a filesystem server"


@pytest.mark.parametrize(
    ("route", "path"),
    [
        (
            Route(exit="east_filesystem_server", with_={"path": "${nope}"}, path="r"),
            "r.with.path",
        ),
        (Route(exit=None, path="r"), "r.exit"),
    ],
)
def test_bad_routes_are_config_errors_with_their_path(
    context: Context, route: Route, path: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        _proxy(context, route)
    assert caught.value.path == path


def test_the_schema_refuses_other_conditions_and_with_options() -> None:
    routes = [
        {"exit": "e", "when": [{"headers": {}}]},
        {"exit": "e", "with": {"path": "/{path}", "directory": "x"}},
    ]
    assert binding_errors("m", "http-filesystem", "proxy", routes=routes) == [
        "bindings.m.routes[0].when[0].headers: 'headers' is not allowed here (allowed: path)",
        "bindings.m.routes[1].with.directory: 'directory' is not allowed here (allowed: path)",
    ]

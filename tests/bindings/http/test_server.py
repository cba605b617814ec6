"""The http server binding end to end: routing, CORS, errors, metrics, config checks."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from tests.guards.signing import AUDIENCE, ISSUER, key, token
from tests.support.schema_errors import binding_errors

from ssegate.bindings.http.h2_floods import FrameBudgets
from ssegate.bindings.http.server import GuardCredentials, HttpServer, build
from ssegate.bindings.http.types import HttpLimits
from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding, Config, Route
from ssegate.contract.exchange import Request
from ssegate.contract.identity import CredentialsRejected, Identity
from ssegate.engine.context import ExitKind
from ssegate.guards.credentials import CredentialsLookup
from ssegate.guards.jwks import KeySet
from ssegate.guards.jwt import ClaimsPolicy
from ssegate.guards.jwt_guard import JwtGuard
from ssegate.host.turns import TurnBudget
from ssegate.telemetry.metrics import Metrics
from ssegate.tools.token import public_jwk
from support.http_servers import H2Client, ScriptedHandler, read_h1_response, run, serve

T = TypeVar("T")

NAME = "north_http_server"


class FakeContext:
    """A BuildContext holding already-built exits by name."""

    def __init__(self, exits: dict[str, Any]) -> None:
        self.exits = exits
        self.metrics = Metrics()
        self.config = Config(name="test", bindings={})

    def exit(self, name: str, kind: ExitKind[T], where: str) -> T:
        return kind.require(self.exits[name], where, repr(name))


def _binding(options: dict[str, Any] | None = None, exit_name: str = "app") -> Binding:
    routes = [
        Route(
            exit=exit_name,
            when=[{"headers": {":path": "/items/{id}"}}],
            path=f"bindings.{NAME}.routes[0]",
        ),
        Route(exit=exit_name, when=[{"headers": {":path": "/echo"}}]),
        Route(exit=exit_name, when=[{"headers": {":path": "/stream"}}]),
        Route(exit=exit_name, when=[{"headers": {":path": "/fail"}}]),
    ]
    return Binding(NAME, "http", "server", options=options or {}, routes=routes)


CORS = {
    "access-control": {
        "policy": "cross-origin",
        "allow": {
            "origins": ["https://app.example.com"],
            "methods": ["GET"],
            "headers": ["last-event-id"],
        },
    }
}


def _server(options: dict[str, Any] | None = None) -> tuple[HttpServer, ScriptedHandler]:
    handler = ScriptedHandler()
    ctx = FakeContext({"app": handler})
    return build(_binding(options), ctx), handler  # type: ignore[arg-type]


async def _get(port: int, target: str, headers: str = "", method: str = "GET") -> Any:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"{method} {target} HTTP/1.1\r\nHost: localhost\r\n{headers}\r\n".encode())
    response = await read_h1_response(reader)
    writer.close()
    return response


def test_a_matching_route_reaches_its_exit_with_captured_params() -> None:
    server, handler = _server()

    async def scenario() -> None:
        async with serve(server.protocol_factory()) as port:
            response = await _get(port, "/items/42?x=1")
            assert response.status == 404  # the scripted handler knows no /items path
        assert handler.requests[0].params == {"id": "42"}

    run(scenario)


def test_no_route_is_404() -> None:
    server, handler = _server()

    async def scenario() -> None:
        async with serve(server.protocol_factory()) as port:
            assert (await _get(port, "/nowhere")).status == 404
        assert handler.requests == []

    run(scenario)


def test_cors_preflight_is_answered_204_and_a_refused_origin_403() -> None:
    server, handler = _server(CORS)

    async def scenario() -> None:
        async with serve(server.protocol_factory()) as port:
            asked = "Access-Control-Request-Method: GET\r\n"
            allowed = await _get(
                port, "/echo", f"Origin: https://app.example.com\r\n{asked}", "OPTIONS"
            )
            refused = await _get(
                port, "/echo", f"Origin: https://evil.example\r\n{asked}", "OPTIONS"
            )
            assert allowed.status == 204
            assert allowed.headers["access-control-allow-origin"] == "https://app.example.com"
            assert refused.status == 403
            plain_refused = await _get(port, "/echo", "Origin: https://evil.example\r\n")
            assert plain_refused.status == 403
        assert handler.requests == []

    run(scenario)


def test_cors_headers_are_added_to_what_the_handler_sends() -> None:
    server, _ = _server(CORS)

    async def scenario() -> None:
        async with serve(server.protocol_factory()) as port:
            response = await _get(port, "/echo", "Origin: https://app.example.com\r\n")
            assert response.status == 200
            assert response.headers["access-control-allow-origin"] == "https://app.example.com"

    run(scenario)


def test_a_handler_that_raises_is_answered_500_with_one_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server, _ = _server()

    async def scenario() -> None:
        async with serve(server.protocol_factory()) as port:
            assert (await _get(port, "/fail")).status == 500
            assert (await _get(port, "/echo")).status == 200

    with caplog.at_level(logging.ERROR, logger="ssegate"):
        run(scenario)
    failures = [r for r in caplog.records if "http.handler_failed" in r.getMessage()]
    assert len(failures) == 1
    assert NAME in failures[0].getMessage()
    assert failures[0].exc_info is None
    assert server.metrics.counter("stream.errors.sent", NAME) == 1


class BrokenGuard:
    """A guard that fails by raising, not by refusing; ``after_refetch`` asks for a refresh
    (of keys) first."""

    name = "broken"
    scheme = "Bearer"

    def __init__(self, *, after_refetch: bool) -> None:
        self.after_refetch = after_refetch

    def authorize(self, credentials: str) -> CredentialsRejected:
        if self.after_refetch:
            return CredentialsRejected("unknown kid", refreshable=True)
        raise KeyError(credentials[:4])

    def refresh(self) -> asyncio.Future[None]:
        self.after_refetch = False
        fetched: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        fetched.get_loop().call_later(0.01, fetched.set_result, None)
        return fetched


@pytest.mark.parametrize("after_refetch", [False, True], ids=["at-once", "after-key-refetch"])
def test_a_guard_that_raises_is_answered_500_with_one_log_line_on_a_live_connection(
    caplog: pytest.LogCaptureFixture, after_refetch: bool
) -> None:
    server, handler = _server()
    lookup = CredentialsLookup.from_options(
        {"credentials": {"headers": {"authorization": "Bearer {credentials}"}}}, "authorization"
    )
    guard = BrokenGuard(after_refetch=after_refetch)
    server.authorization = [GuardCredentials("broken", guard, lookup)]

    async def scenario() -> None:
        async with serve(server.protocol_factory()) as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            for bearer in ["Authorization: Bearer abcdef\r\n", ""]:
                writer.write(f"GET /echo HTTP/1.1\r\nHost: x\r\n{bearer}\r\n".encode())
                answers.append((await read_h1_response(reader)).status)
            writer.close()

    answers: list[int] = []
    with caplog.at_level(logging.ERROR):
        run(scenario)
    assert answers == [500, 200]  # the same connection answers the next request
    failures = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.getMessage().split(" ", 1)[0] for r in failures] == ["http.dispatch_failed"]
    assert "KeyError: 'abcd'" in failures[0].getMessage()
    assert failures[0].exc_info is None
    assert len(handler.requests) == 1


class Issuer:
    """The JWKS document the issuer serves: the key ``rotated``, which the guard learns only
    by fetching it."""

    def __init__(self) -> None:
        self.fetches = 0

    async def fetch(self, url: str) -> bytes:
        self.fetches += 1
        await asyncio.sleep(0.01)
        return json.dumps({"keys": [public_jwk(key("ec"), "rotated")]}).encode()


def test_a_token_naming_a_key_the_guard_must_fetch_is_answered_once_the_keys_arrive() -> None:
    server, handler = _server()
    issuer = Issuer()
    keys = KeySet(url="https://issuer/jwks.json", fetch=issuer.fetch)
    guard = JwtGuard("authn_jwt", keys, ClaimsPolicy(issuer=ISSUER, audience=AUDIENCE))
    lookup = CredentialsLookup.from_options(
        {"credentials": {"headers": {"authorization": "Bearer {credentials}"}}}, "authorization"
    )
    server.authorization = [GuardCredentials("authn_jwt", guard, lookup)]
    bearer = f"Authorization: Bearer {token(kid='rotated')}\r\n"

    async def scenario() -> list[int]:
        async with serve(server.protocol_factory()) as port:
            return [(await _get(port, "/echo", bearer)).status for _ in range(2)]

    assert run(scenario) == [200, 200]
    assert issuer.fetches == 1  # the second request found the key held
    identity = handler.requests[0].identities["authn_jwt"]
    assert isinstance(identity, Identity) and identity.identity == "alice"


class RecordingStream:
    """A response as the protocol sees it: what was sent, nothing more."""

    def __init__(self) -> None:
        self.status = 0
        self.body = b""
        self.closed = False

    def send_headers(
        self, status: int, headers: list[tuple[str, str]], *, end: bool = False
    ) -> None:
        self.status, self.closed = status, end

    def send_data(self, data: bytes, *, end: bool = False) -> None:
        self.body += data
        self.closed = end

    def on_close(self, callback: Callable[[], None]) -> None:
        pass


def test_a_request_that_waits_for_nothing_is_answered_inside_dispatch_without_a_task() -> None:
    server, _ = _server()
    server.turns = TurnBudget()

    async def scenario() -> None:
        tasks = asyncio.all_tasks()
        stream = RecordingStream()
        server.dispatch(Request("GET", "http", "localhost", "/echo", {}), b"", stream)  # type: ignore[arg-type]
        assert (stream.status, stream.body, stream.closed) == (200, b"/echo", True)
        assert asyncio.all_tasks() == tasks

    asyncio.run(scenario())
    assert server.metrics.counter("ssegate.http.requests.deferred", NAME) == 0


def test_every_exchange_is_measured_when_it_closes() -> None:
    server, handler = _server()

    async def scenario() -> None:
        async with serve(server.protocol_factory()) as port:
            await _get(port, "/echo")
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /stream HTTP/1.1\r\nHost: localhost\r\n\r\n")
            await handler.stream_opened.wait()
            assert server.metrics.gauge_value("http.active.requests", NAME) == 1
            handler.streams[0].send_data(b"data:x\n\n", end=True)
            await read_h1_response(reader)
            writer.close()

    run(scenario)
    metrics = server.metrics
    assert metrics.counter("stream.opens.received", NAME) == 2
    assert metrics.counter("stream.closes.sent", NAME) == 2
    assert metrics.gauge_value("http.active.requests", NAME) == 0
    assert metrics.histograms[("http.duration", (("binding", NAME),))].count == 2
    sizes = metrics.histograms[("http.response.size", (("binding", NAME),))]
    assert sizes.total == len(b"/echo") + len(b"data:x\n\n")


def test_each_open_http2_stream_counts_as_a_request_being_answered() -> None:
    # what the host's collector reads as the streams a process holds: over HTTP/2 one
    # connection carries many, and each counts
    server, handler = _server()

    async def scenario() -> None:
        async with serve(server.protocol_factory()) as port:
            client = await H2Client.connect(port)
            for _ in range(3):
                client.request("GET", "/stream")
            while len(handler.streams) < 3:
                await handler.stream_opened.wait()
                handler.stream_opened.clear()
            assert server.metrics.gauge_value("http.active.requests", NAME) == 3
            assert server.metrics.gauge_value("ssegate.connections.active", NAME) == 1
            await client.close()

    run(scenario)
    assert server.metrics.gauge_value("http.active.requests", NAME) == 0


@pytest.mark.parametrize(
    ("versions", "error"),
    [
        (["h3"], "versions[0]: 'h3' is not one of ['http/1.1', 'h2']"),
        ([], "versions: [] should be non-empty"),
        ("h2", "versions: expected a list, got 'h2'"),
    ],
)
def test_bad_versions_are_a_config_error_with_their_path(versions: Any, error: str) -> None:
    errors = binding_errors(NAME, "http", "server", options={"versions": versions})
    assert errors == [f"bindings.{NAME}.options.{error}"]


def test_an_exit_that_cannot_answer_http_is_a_config_error_naming_the_exit() -> None:
    ctx = FakeContext({"app": object()})
    with pytest.raises(ConfigError, match="is not a binding that answers HTTP requests") as raised:
        build(_binding(), ctx)  # type: ignore[arg-type]
    assert raised.value.path == f"bindings.{NAME}.routes[0].exit"


def test_http2_options_become_the_connection_limits_and_the_rest_keep_their_defaults() -> None:
    server, _ = _server(
        {
            "http2": {
                "frames-per-second": {"ping": 5, "rst-stream": 7},
                "frame-burst": 3,
                "max-unread-acks": 10,
                "request-timeout": 2.5,
            }
        }
    )
    assert server.limits.frames == FrameBudgets(ping=5, rst_stream=7, burst=3)
    assert (server.limits.max_unread_acks, server.limits.request_timeout) == (10, 2.5)
    assert _server()[0].limits == HttpLimits()


def test_the_http1_request_timeout_is_its_own_and_defaults_to_the_http2_one() -> None:
    server, _ = _server({"http1": {"request-timeout": 2.5}, "http2": {"request-timeout": 4}})
    assert (server.limits.http1_request_timeout, server.limits.request_timeout) == (2.5, 4)
    defaults = _server()[0].limits
    assert defaults.http1_request_timeout == defaults.request_timeout == 10


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"request-timeout": 0}, "0 is less than or equal to the minimum of 0"),
        ({"request-timeout": "10s"}, "expected a number, got '10s'"),
    ],
)
def test_a_bad_http1_request_timeout_is_a_config_error_with_its_path(
    options: dict[str, Any], error: str
) -> None:
    errors = binding_errors(NAME, "http", "server", options={"http1": options})
    assert errors == [f"bindings.{NAME}.options.http1.request-timeout: {error}"]


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"request-timeout": 0}, "request-timeout: 0 is less than or equal to the minimum of 0"),
        (
            {"frames-per-second": {"ping": -1}},
            "frames-per-second.ping: -1 is less than or equal to the minimum of 0",
        ),
        ({"frame-burst": "lots"}, "frame-burst: expected a number, got 'lots'"),
        ({"max-unread-acks": 1.5}, "max-unread-acks: expected a whole number, got 1.5"),
    ],
)
def test_bad_http2_options_are_a_config_error_with_their_path(
    options: dict[str, Any], error: str
) -> None:
    errors = binding_errors(NAME, "http", "server", options={"http2": options})
    assert errors == [f"bindings.{NAME}.options.http2.{error}"]

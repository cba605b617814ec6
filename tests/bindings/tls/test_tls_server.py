"""The tls server binding over real sockets: ALPN, SNI, versions, failed handshakes."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import shutil
import socket
import ssl
import subprocess
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvloop
from tests.support.schema_errors import binding_errors

from ssegate.bindings.tls.server import TlsServer, build, install_loop_exception_filter
from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding, Component, Config, Route
from ssegate.engine.runtime import Runtime
from ssegate.telemetry import log
from ssegate.telemetry.metrics import Metrics
from ssegate_lab.testing.certs import CertBundle, make_keystore

PASSWORD = "s3cret"
FAILURES = "ssegate.tls.handshake.failures"


def runtime_for(
    directory: Path,
    store: str,
    bindings: dict[str, Binding] | None = None,
    trust: str | None = None,
) -> Runtime:
    """A real runtime over a config holding vault ``my_servers`` and ``bindings``."""
    options: dict[str, Any] = {"keys": {"store": store, "password": PASSWORD}}
    if trust:
        options["trust"] = {"store": trust, "password": PASSWORD}
    vault = Component("my_servers", "filesystem", options, "vaults.my_servers")
    config = Config("test", bindings or {}, vaults={"my_servers": vault}, base_dir=str(directory))
    return Runtime(config)


def tls_binding(**options: Any) -> Binding:
    return Binding("north_tls_server", "tls", "server", options, exit="http", vault="my_servers")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> CertBundle:
    return make_keystore(tmp_path_factory.mktemp("tls") / "localhost.p12", password=PASSWORD)


@pytest.fixture
def context(bundle: CertBundle) -> Runtime:
    return runtime_for(bundle.keystore.parent, bundle.keystore.name)


@pytest.fixture
def events() -> Iterator[io.StringIO]:
    out = io.StringIO()
    log.enable_stdout_events(out)
    yield out
    log.disable_stdout_events()


def named(out: io.StringIO, name: str) -> list[dict[str, Any]]:
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    return [r for r in records if r["event"] == name]


class Accepted(asyncio.Protocol):
    negotiated: list[str | None] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        ssl_object = transport.get_extra_info("ssl_object")
        self.negotiated.append(ssl_object.selected_alpn_protocol())


def run(main: Callable[[], Coroutine[Any, Any, Any]], loop_kind: str = "uvloop") -> Any:
    """``main`` on uvloop, stdlib ``asyncio``, or ``asyncio-debug`` (stdlib in debug mode, which
    hands handshake failures to the loop's exception handler too)."""
    if loop_kind == "uvloop":
        return uvloop.run(main())
    debug = loop_kind == "asyncio-debug"
    with asyncio.Runner(loop_factory=asyncio.SelectorEventLoop, debug=debug) as runner:
        return runner.run(main())


async def handshake(
    tls: TlsServer, client: ssl.SSLContext, server_hostname: str | None = "localhost"
) -> ssl.SSLObject:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Accepted, "127.0.0.1", 0, ssl=tls.ssl_context)
    port = server.sockets[0].getsockname()[1]
    try:
        transport, _ = await asyncio.wait_for(
            loop.create_connection(
                asyncio.Protocol, "127.0.0.1", port, ssl=client, server_hostname=server_hostname
            ),
            5,
        )
        ssl_object: ssl.SSLObject = transport.get_extra_info("ssl_object")
        transport.close()
        return ssl_object
    finally:
        server.close()


def client_context(bundle: CertBundle, alpn: list[str] | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(bundle.ca_pem))
    if alpn:
        context.set_alpn_protocols(alpn)
    return context


@pytest.mark.parametrize(
    ("offered", "negotiated"),
    [(["h2", "http/1.1"], "h2"), (["http/1.1"], "http/1.1"), (["http/1.1", "h2"], "h2")],
)
def test_alpn_negotiates_h2_first_then_http11(
    context: Runtime, bundle: CertBundle, offered: list[str], negotiated: str
) -> None:
    tls = build(tls_binding(keys=["localhost"], sni=["localhost"]), context)
    ssl_object = run(lambda: handshake(tls, client_context(bundle, offered)))
    assert ssl_object.selected_alpn_protocol() == negotiated
    assert ssl_object.version() in ("TLSv1.2", "TLSv1.3")


def test_alpn_follows_the_http_versions_when_not_configured(
    context: Runtime, bundle: CertBundle
) -> None:
    http = Binding("http", "http", "server", {"versions": ["http/1.1"]})
    context = runtime_for(bundle.keystore.parent, bundle.keystore.name, {"http": http})
    tls = build(tls_binding(keys=["localhost"]), context)
    assert tls.alpn == ("http/1.1",)
    ssl_object = run(lambda: handshake(tls, client_context(bundle, ["h2", "http/1.1"])))
    assert ssl_object.selected_alpn_protocol() == "http/1.1"


def test_alpn_routes_pick_the_exit(context: Runtime) -> None:
    routes = [
        Route("h2_server", [{"alpn": "h2"}], path="bindings.north_tls_server.routes[0]"),
        Route("h1_server", [{"alpn": "http/1.1"}], path="bindings.north_tls_server.routes[1]"),
    ]
    binding = Binding(
        "north_tls_server", "tls", "server", {}, routes=routes, exit="http", vault="my_servers"
    )
    tls = build(binding, context)
    assert tls.exit_for_alpn("h2") == "h2_server"
    assert tls.exit_for_alpn("http/1.1") == "h1_server"
    assert tls.exit_for_alpn(None) == "http"


def test_a_server_name_outside_sni_is_refused_and_logged(
    context: Runtime, bundle: CertBundle, events: io.StringIO
) -> None:
    tls = build(tls_binding(keys=["localhost"], sni=["localhost"]), context)
    client = client_context(bundle)
    client.check_hostname = False
    with pytest.raises((ssl.SSLError, ConnectionError)):
        run(lambda: handshake(tls, client, server_hostname="elsewhere.test"))
    (record,) = named(events, "tls.handshake_failed")
    assert record["reason"] == "sni_not_allowed"
    assert record["server_name"] == "elsewhere.test"
    assert context.metrics.counter(FAILURES, "north_tls_server", reason="sni_not_allowed") == 1


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated")
def test_tls11_client_is_refused(context: Runtime, bundle: CertBundle) -> None:
    tls = build(tls_binding(keys=["localhost"]), context)
    old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    old.load_verify_locations(cafile=str(bundle.ca_pem))
    old.set_ciphers("DEFAULT:@SECLEVEL=0")
    old.minimum_version = old.maximum_version = ssl.TLSVersion.TLSv1_1
    with pytest.raises((ssl.SSLError, ConnectionError)):
        run(lambda: handshake(tls, old))
    assert context.metrics.counter(FAILURES, "north_tls_server", reason="unsupported_protocol") == 1


@pytest.mark.parametrize("loop_kind", ["uvloop", "asyncio", "asyncio-debug"])
def test_garbage_bytes_log_one_event_and_no_traceback(
    context: Runtime,
    events: io.StringIO,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    loop_kind: str,
) -> None:
    tls = build(tls_binding(keys=["localhost"]), context)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        install_loop_exception_filter(loop, context.metrics)
        server = await loop.create_server(Accepted, "127.0.0.1", 0, ssl=tls.ssl_context)
        port = server.sockets[0].getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as raw:
            raw.sendall(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            raw.setblocking(False)
            for _ in range(100):
                await asyncio.sleep(0.01)
                if context.metrics.total(FAILURES):
                    break
        server.close()
        await asyncio.sleep(0.05)

    with caplog.at_level(logging.DEBUG):
        run(main, loop_kind)
    (record,) = named(events, "tls.handshake_failed")
    assert record["binding"] == "north_tls_server"
    assert record["reason"] == "http_request"
    assert record["peer"] == "unknown"  # the SSLObject that reports it is not told the peer
    assert context.metrics.counter(FAILURES, "north_tls_server", reason="http_request") == 1
    assert "Traceback" not in capsys.readouterr().err
    assert not [r for r in caplog.records if r.exc_info and r.levelno >= logging.WARNING]


def test_exception_filter_reports_ssl_errors_and_passes_the_rest_on(events: io.StringIO) -> None:
    metrics = Metrics()
    seen: list[dict[str, Any]] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, context: seen.append(context))
        install_loop_exception_filter(loop, metrics)
        install_loop_exception_filter(loop, metrics)  # a second install changes nothing
        error = ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")
        error.reason = "WRONG_VERSION_NUMBER"
        loop.call_exception_handler({"message": "SSL handshake failed", "exception": error})
        loop.call_exception_handler({"message": "boom", "exception": ValueError("x")})

    asyncio.run(main())
    (record,) = named(events, "tls.handshake_failed")
    assert record["reason"] == "wrong_version_number"
    assert record["peer"] == "unknown"
    assert metrics.total(FAILURES) == 1
    assert [c["message"] for c in seen] == ["boom"]


@pytest.mark.skipif(shutil.which("keytool") is None, reason="keytool not installed")
def test_sni_selects_the_key_named_by_the_client(tmp_path: Path) -> None:
    for alias in ("alpha.test", "beta.test"):
        subprocess.run(
            [
                "keytool", "-genkeypair", "-storetype", "PKCS12", "-keystore", "two.p12",
                "-storepass", PASSWORD, "-alias", alias, "-keyalg", "EC",
                "-dname", f"CN={alias}", "-ext", f"SAN=dns:{alias}", "-validity", "2",
            ],
            cwd=tmp_path, check=True, capture_output=True,
        )  # fmt: skip
    context = runtime_for(tmp_path, "two.p12")
    tls = build(tls_binding(keys=["alpha.test", "beta.test"]), context)
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.check_hostname = False
    client.verify_mode = ssl.CERT_NONE

    async def subjects() -> list[str]:
        names = []
        for host in ("beta.test", "alpha.test", None):
            ssl_object = await handshake(tls, client, server_hostname=host)
            der = ssl_object.getpeercert(binary_form=True)
            assert der is not None
            from cryptography import x509

            names.append(x509.load_der_x509_certificate(der).subject.rfc4514_string())
        return names

    assert run(subjects) == ["CN=beta.test", "CN=alpha.test", "CN=alpha.test"]


def test_mutual_required_refuses_a_client_without_a_certificate(bundle: CertBundle) -> None:
    context = runtime_for(
        bundle.keystore.parent, bundle.keystore.name, trust=bundle.truststore.name
    )
    vault = context.vault("my_servers")
    tls = build(tls_binding(keys=["localhost"], trust=["ca"]), context)
    assert tls.ssl_context.verify_mode == ssl.CERT_REQUIRED
    with_cert = client_context(bundle)
    vault.load_key_into(with_cert, "localhost")
    assert run(lambda: handshake(tls, with_cert)).version() is not None

    async def without_cert() -> None:
        ssl_object = await handshake(tls, client_context(bundle))
        if ssl_object.version() == "TLSv1.3":  # TLS 1.3 refuses after the client finished
            await asyncio.sleep(0.2)

    with contextlib.suppress(ssl.SSLError, ConnectionError):
        run(without_cert)
    reason = "peer_did_not_return_a_certificate"
    assert context.metrics.counter(FAILURES, "north_tls_server", reason=reason) == 1


def test_a_tls_server_without_a_vault_is_a_config_error(context: Runtime) -> None:
    binding = Binding("north_tls_server", "tls", "server", {"keys": ["localhost"]}, exit="h")
    with pytest.raises(ConfigError) as raised:
        build(binding, context)
    assert raised.value.path == "bindings.north_tls_server.vault"


def test_an_unknown_key_alias_names_the_option_entry(context: Runtime) -> None:
    with pytest.raises(ConfigError) as raised:
        build(tls_binding(keys=["localhost", "x"]), context)
    assert str(raised.value) == (
        "bindings.north_tls_server.options.keys[1]: alias 'x' is not in vault 'my_servers'"
        " (aliases: localhost)"
    )


def test_an_old_version_option_is_refused() -> None:
    options = {"keys": ["localhost"], "version": "TLSv1.1"}
    assert binding_errors(
        "north_tls_server", "tls", "server", vault="my_servers", options=options, exit="http"
    ) == [
        "bindings.north_tls_server.options.version: 'TLSv1.1' is not one of ['TLSv1.2', 'TLSv1.3']"
    ]

"""The tls client binding: verifies upstreams against the vault's trust store."""

from __future__ import annotations

import asyncio
import ssl

import pytest

from ssegate.bindings.tls import client as tls_client
from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding, Component, Config
from ssegate.engine.runtime import Runtime
from ssegate.testing.certs import CertBundle, make_keystore
from ssegate.vaults.filesystem import build_vault

PASSWORD = "s3cret"


def runtime_for(bundle: CertBundle) -> Runtime:
    """A real runtime over a config holding vault ``clients`` (the truststore only)."""
    vault = Component(
        "clients", "filesystem", {"trust": {"store": bundle.truststore.name, "password": PASSWORD}}
    )
    config = Config("test", {}, vaults={"clients": vault}, base_dir=str(bundle.truststore.parent))
    return Runtime(config)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> CertBundle:
    return make_keystore(tmp_path_factory.mktemp("up") / "upstream.p12", password=PASSWORD)


async def connect(bundle: CertBundle, client: ssl.SSLContext, hostname: str) -> str | None:
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(*_pem_pair(bundle))
    server_context.set_alpn_protocols(["http/1.1"])
    loop = asyncio.get_running_loop()
    server = await loop.create_server(asyncio.Protocol, "127.0.0.1", 0, ssl=server_context)
    port = server.sockets[0].getsockname()[1]
    try:
        transport, _ = await loop.create_connection(
            asyncio.Protocol, "127.0.0.1", port, ssl=client, server_hostname=hostname
        )
        alpn: str | None = transport.get_extra_info("ssl_object").selected_alpn_protocol()
        transport.close()
        return alpn
    finally:
        server.close()


def _pem_pair(bundle: CertBundle) -> tuple[str, str]:
    keys = build_vault(
        Component(
            "k", "filesystem", {"keys": {"store": bundle.keystore.name, "password": PASSWORD}}
        ),
        lambda path: str(bundle.keystore.parent / path),
    )
    directory = bundle.keystore.parent / "pem"
    directory.mkdir(exist_ok=True)
    return keys.write_pem_pair("localhost", str(directory))


def test_client_trusts_the_vault_ca_and_checks_the_sni_name(bundle: CertBundle) -> None:
    binding = Binding(
        "south_tls_client", "tls", "client",
        {"trust": ["ca"], "sni": ["localhost"], "alpn": ["http/1.1"]},
        exit="south_tcp_client", vault="clients",
    )  # fmt: skip
    client = tls_client.build(binding, runtime_for(bundle))
    assert client.exit == "south_tcp_client"
    assert client.server_hostname("10.0.0.7") == "localhost"
    assert asyncio.run(connect(bundle, client.ssl_context, "localhost")) == "http/1.1"
    with pytest.raises(ssl.SSLCertVerificationError):
        asyncio.run(connect(bundle, client.ssl_context, "elsewhere.test"))


def test_client_without_trust_uses_the_system_cas_and_refuses_the_test_ca(
    bundle: CertBundle,
) -> None:
    binding = Binding("c", "tls", "client", {}, exit="tcp")
    client = tls_client.build(binding, runtime_for(bundle))
    assert client.server_hostname("localhost") == "localhost"
    with pytest.raises(ssl.SSLCertVerificationError):
        asyncio.run(connect(bundle, client.ssl_context, "localhost"))


def test_a_tls_client_needs_an_exit(bundle: CertBundle) -> None:
    with pytest.raises(ConfigError) as raised:
        tls_client.build(Binding("c", "tls", "client", {}), runtime_for(bundle))
    assert raised.value.path == "bindings.c.exit"

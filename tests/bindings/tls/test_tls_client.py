"""The tls client binding: verifies upstreams against the vault's trust store."""

from __future__ import annotations

import asyncio
import ssl

import pytest

from ssegate.bindings.tls import client as tls_client
from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding, Component, Config
from ssegate.engine.runtime import Runtime
from ssegate.vaults.filesystem import build_vault
from ssegate_lab.testing.certs import CertBundle, make_keystore

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


async def connect(
    bundle: CertBundle, client: ssl.SSLContext, hostname: str, *, client_certificate: bool = False
) -> str | None:
    """Handshake with a server on the bundle's key; with ``client_certificate`` the server
    requires one signed by the bundle's CA, and the handshake fails without it (TLS 1.3 says
    so at the first read)."""
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(*_pem_pair(bundle))
    server_context.set_alpn_protocols(["http/1.1"])
    if client_certificate:
        server_context.verify_mode = ssl.CERT_REQUIRED
        server_context.load_verify_locations(cafile=str(bundle.ca_pem))
    loop = asyncio.get_running_loop()
    server = await loop.create_server(asyncio.Protocol, "127.0.0.1", 0, ssl=server_context)
    port = server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client, server_hostname=hostname
        )
        alpn: str | None = writer.get_extra_info("ssl_object").selected_alpn_protocol()
        if client_certificate:
            try:  # a refused certificate is an alert (or the end) at the first read
                if not await asyncio.wait_for(reader.read(1), 1):
                    raise ConnectionError("the server closed the connection")
            except TimeoutError:
                pass  # still open: the server took the certificate
        writer.close()
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


def test_version_bounds_the_protocol_the_client_speaks(bundle: CertBundle) -> None:
    binding = Binding(
        "c", "tls", "client", {"trust": ["ca"], "version": "TLSv1.3"}, exit="tcp", vault="clients"
    )
    context = tls_client.build(binding, runtime_for(bundle)).ssl_context
    assert (context.minimum_version, context.maximum_version) == (
        ssl.TLSVersion.TLSv1_3,
        ssl.TLSVersion.TLSv1_3,
    )


def test_trustcacerts_adds_the_system_cas_to_the_vault_trust(bundle: CertBundle) -> None:
    def trusted(**options: object) -> int:
        binding = Binding(
            "c", "tls", "client", {"trust": ["ca"], **options}, exit="tcp", vault="clients"
        )
        context = tls_client.build(binding, runtime_for(bundle)).ssl_context
        return int(context.cert_store_stats()["x509_ca"])

    assert trusted() == 1  # the vault's CA only
    assert trusted(trustcacerts=True) > 1


def test_keys_present_a_client_certificate_to_a_server_that_asks(bundle: CertBundle) -> None:
    vault = Component(
        "clients",
        "filesystem",
        {
            "keys": {"store": bundle.keystore.name, "password": PASSWORD},
            "trust": {"store": bundle.truststore.name, "password": PASSWORD},
        },
    )
    config = Config("test", {}, vaults={"clients": vault}, base_dir=str(bundle.keystore.parent))

    def handshake(**options: object) -> bool:
        binding = Binding(
            "c", "tls", "client", {"trust": ["ca"], **options}, exit="tcp", vault="clients"
        )
        context = tls_client.build(binding, Runtime(config)).ssl_context
        try:
            asyncio.run(connect(bundle, context, "localhost", client_certificate=True))
        except (ssl.SSLError, ConnectionError):
            return False
        return True

    assert handshake(keys=["localhost"])
    assert not handshake()

"""Keystores from the shipped helper, the openssl CLI and keytool all load in the vault."""

from __future__ import annotations

import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from cryptography import x509

from ssegate.config.model import Component
from ssegate.vaults.filesystem import FilesystemVault, build_vault
from ssegate_lab.testing.certs import KeyType, make_keystore

PASSWORD = "s3cret"


def vault_for(directory: Path, store: str, *, trust: str | None = None) -> FilesystemVault:
    options: dict[str, object] = {"keys": {"store": store, "password": PASSWORD}}
    if trust:
        options["trust"] = {"store": trust, "password": PASSWORD}
    component = Component("my_servers", "filesystem", options, "vaults.my_servers")
    return build_vault(component, lambda path: str(directory / path))


@pytest.mark.parametrize("key_type", ["ec", "rsa"])
def test_helper_keystore_has_the_alias_the_hosts_and_a_trusting_truststore(
    tmp_path: Path, key_type: KeyType
) -> None:
    bundle = make_keystore(
        tmp_path / "localhost.p12", alias="localhost", password=PASSWORD, key_type=key_type
    )
    vault = vault_for(tmp_path, "localhost.p12", trust=bundle.truststore.name)
    entry = vault.key("localhost")
    san = entry.certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert san.value.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(ip) for ip in san.value.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert vault.aliases() == ["localhost"]
    assert vault.aliases("trust") == ["ca"]
    (ca,) = vault.trust_certs()
    assert entry.chain == (ca,)
    assert entry.certificate.issuer == ca.subject
    assert bundle.ca_pem.read_bytes().startswith(b"-----BEGIN CERTIFICATE-----")
    assert stat.S_IMODE(bundle.keystore.stat().st_mode) == 0o600


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl CLI not installed")
def test_openssl_cli_keystore_with_a_name_answers_to_that_alias(tmp_path: Path) -> None:
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "key.pem", "-out",
        "cert.pem", "-subj", "/CN=localhost", "-days", "2", cwd=tmp_path,
    )  # fmt: skip
    _openssl(
        "pkcs12", "-export", "-in", "cert.pem", "-inkey", "key.pem", "-name", "localhost",
        "-out", "named.p12", "-passout", f"pass:{PASSWORD}", cwd=tmp_path,
    )  # fmt: skip
    vault = vault_for(tmp_path, "named.p12")
    assert vault.aliases() == ["localhost"]
    assert vault.key("localhost").certificate.subject.rfc4514_string() == "CN=localhost"


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl CLI not installed")
def test_openssl_cli_keystore_without_a_name_answers_to_any_alias(tmp_path: Path) -> None:
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", "key.pem", "-out", "cert.pem", "-subj", "/CN=localhost", "-days", "2",
        cwd=tmp_path,
    )  # fmt: skip
    _openssl(
        "pkcs12", "-export", "-in", "cert.pem", "-inkey", "key.pem", "-out", "plain.p12",
        "-passout", f"pass:{PASSWORD}", cwd=tmp_path,
    )  # fmt: skip
    vault = vault_for(tmp_path, "plain.p12")
    assert vault.aliases() == []
    assert vault.key("anything").alias is None


@pytest.mark.skipif(shutil.which("keytool") is None, reason="keytool not installed")
def test_keytool_keystore_answers_to_its_alias(tmp_path: Path) -> None:
    subprocess.run(
        [
            "keytool", "-genkeypair", "-storetype", "PKCS12", "-keystore", "kt.p12",
            "-storepass", PASSWORD, "-alias", "localhost", "-keyalg", "EC",
            "-dname", "CN=localhost", "-ext", "SAN=dns:localhost", "-validity", "2",
        ],
        cwd=tmp_path, check=True, capture_output=True,
    )  # fmt: skip
    vault = vault_for(tmp_path, "kt.p12")
    assert vault.aliases() == ["localhost"]
    assert vault.key("localhost").certificate.subject.rfc4514_string() == "CN=localhost"

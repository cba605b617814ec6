"""The filesystem vault: stores read once, entries by alias, precise config errors."""

from __future__ import annotations

import os
import ssl
import stat
import tempfile
from pathlib import Path

import pytest

from ssegate.config.errors import ConfigError
from ssegate.config.model import Component
from ssegate.vaults.filesystem import FilesystemVault, build_vault
from ssegate_lab.testing.certs import make_keystore

PASSWORD = "s3cret"


def build(directory: Path, keys: dict[str, object]) -> FilesystemVault:
    component = Component("my_servers", "filesystem", {"keys": keys}, "vaults.my_servers")
    return build_vault(component, lambda path: str(directory / path))


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("vault")
    (directory / "tls").mkdir()
    make_keystore(directory / "tls" / "localhost.p12", password=PASSWORD)
    return directory


def test_missing_store_names_the_yaml_path_and_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        build(tmp_path, {"store": "tls/localhost.p12", "type": "pkcs12", "password": "x"})
    assert str(raised.value) == (
        "vaults.my_servers.options.keys.store: cannot open 'tls/localhost.p12':"
        " No such file or directory"
    )


def test_an_empty_store_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        build(tmp_path, {"store": "", "password": "x"})
    assert str(raised.value) == "vaults.my_servers.options.keys.store: a store path is required"


def test_wrong_password_points_at_the_password(store_dir: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        build(store_dir, {"store": "tls/localhost.p12", "password": "wrong"})
    assert str(raised.value) == (
        "vaults.my_servers.options.keys.password: wrong password for 'tls/localhost.p12'"
    )


def test_a_file_that_is_not_pkcs12_is_named_as_such(tmp_path: Path) -> None:
    (tmp_path / "notes.p12").write_text("hello")
    with pytest.raises(ConfigError) as raised:
        build(tmp_path, {"store": "notes.p12", "password": PASSWORD})
    assert str(raised.value) == (
        "vaults.my_servers.options.keys.store: 'notes.p12' is not a PKCS#12 keystore"
    )


def test_jks_store_type_is_refused_with_the_conversion_hint(store_dir: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        build(store_dir, {"store": "tls/localhost.p12", "type": "jks", "password": PASSWORD})
    assert raised.value.path == "vaults.my_servers.options.keys.type"
    assert "keytool -importkeystore" in raised.value.message


def test_unknown_alias_names_the_reference_and_the_known_aliases(store_dir: Path) -> None:
    vault = build(store_dir, {"store": "tls/localhost.p12", "password": PASSWORD})
    with pytest.raises(ConfigError) as raised:
        vault.key("x", path="bindings.north_tls_server.options.keys[0]")
    assert str(raised.value) == (
        "bindings.north_tls_server.options.keys[0]: alias 'x' is not in vault 'my_servers'"
        " (aliases: localhost)"
    )


def test_pem_pair_is_owner_only_and_loads_into_an_ssl_context(
    store_dir: Path, tmp_path: Path
) -> None:
    vault = build(store_dir, {"store": "tls/localhost.p12", "password": PASSWORD})
    certfile, keyfile = vault.write_pem_pair("localhost", str(tmp_path))
    assert stat.S_IMODE(os.stat(keyfile).st_mode) == 0o600
    assert Path(certfile).read_text().count("BEGIN CERTIFICATE") == 2
    ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(certfile, keyfile)


def test_load_key_into_leaves_no_file_behind(
    store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    vault = build(store_dir, {"store": "tls/localhost.p12", "password": PASSWORD})
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    vault.load_key_into(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), "localhost")
    assert os.listdir(tmp_path) == []

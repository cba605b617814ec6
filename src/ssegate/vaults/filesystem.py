"""The ``filesystem`` vault: private keys and trusted certificates read from PKCS#12 files.

``options.keys``, ``options.trust`` and ``options.signers`` each name a store
(``{store, type: pkcs12, password}``). Each store is read once, when the vault is built; the
TLS bindings then ask for entries by alias:

- an alias is the PKCS#12 *friendly name* of an entry, the name ``keytool -alias`` and
  ``openssl pkcs12 -name`` give it;
- a store holding a single key entry without a friendly name (``openssl pkcs12 -export``
  without ``-name``) answers to any alias with that key, so a config written for a keytool
  store still works with it;
- every key entry of a store is found, not only the first, so one store can serve several
  names (SNI).

:mod:`ssl` loads certificates and keys from files only. :meth:`FilesystemVault.load_key_into`
writes the key, encrypted with a one-time random passphrase, and its certificates to a fresh
directory only the owner can read (``mkdtemp``, files ``0600``), loads them into the context
and removes the directory at once. :meth:`FilesystemVault.write_pem_pair` is the plain variant
for callers that need files that stay.
"""

from __future__ import annotations

import os
import secrets
import ssl
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.hazmat.primitives.serialization import pkcs12

from ssegate.config.errors import ConfigError
from ssegate.config.model import Component

PrivateKey = PrivateKeyTypes
STORE_KINDS = ("keys", "trust", "signers")

# DER content octets of the object identifiers the PKCS#12 walk needs.
_OID_DATA = bytes.fromhex("2a864886f70d010701")
_OID_KEY_BAG = bytes.fromhex("2a864886f70d010c0a0101")
_OID_SHROUDED_KEY_BAG = bytes.fromhex("2a864886f70d010c0a0102")
_OID_FRIENDLY_NAME = bytes.fromhex("2a864886f70d010914")


class KeyEntry(NamedTuple):
    """A private key with its certificate and the certificates that chain it to a root."""

    private_key: PrivateKey
    certificate: x509.Certificate
    chain: tuple[x509.Certificate, ...]
    alias: str | None


@dataclass(frozen=True, slots=True)
class Store:
    """One PKCS#12 file, read: key entries and certificates, each with its alias if any."""

    source: str
    keys: tuple[KeyEntry, ...]
    certificates: tuple[tuple[str | None, x509.Certificate], ...]

    def aliases(self) -> list[str]:
        names = [entry.alias for entry in self.keys if entry.alias]
        names.extend(alias for alias, _ in self.certificates if alias and alias not in names)
        return names


class FilesystemVault:
    """The stores of one ``filesystem`` vault, read once."""

    def __init__(self, name: str, stores: dict[str, Store]) -> None:
        self.name = name
        self.stores = stores

    def aliases(self, kind: str = "keys") -> list[str]:
        store = self.stores.get(kind)
        return store.aliases() if store else []

    def entries(self, kind: str = "keys") -> list[KeyEntry]:
        store = self.stores.get(kind)
        return list(store.keys) if store else []

    def key(self, alias: str, *, path: str = "", kind: str = "keys") -> KeyEntry:
        """The key entry ``alias`` of the ``keys`` (or ``signers``) store.

        ``path`` is the YAML path of the reference, for the error when the alias is unknown.
        """
        where = path or f"vaults.{self.name}.options.{kind}"
        store = self.stores.get(kind)
        if store is None or not store.keys:
            raise ConfigError(where, f"vault '{self.name}' has no {kind} store with a key")
        for entry in store.keys:
            if entry.alias == alias:
                return entry
        if len(store.keys) == 1 and store.keys[0].alias is None:
            return store.keys[0]
        known = ", ".join(store.aliases()) or "none"
        raise ConfigError(
            where, f"alias '{alias}' is not in vault '{self.name}' (aliases: {known})"
        )

    def trust_certs(
        self, aliases: Sequence[str] | None = None, *, path: str = ""
    ) -> list[x509.Certificate]:
        """Certificates of the ``trust`` store: all of them, or those named in ``aliases``."""
        store = self.stores.get("trust")
        where = path or f"vaults.{self.name}.options.trust"
        if store is None:
            if aliases:
                raise ConfigError(where, f"vault '{self.name}' has no trust store")
            return []
        if aliases is None:
            return [cert for _, cert in store.certificates]
        chosen: list[x509.Certificate] = []
        for index, alias in enumerate(aliases):
            found = [cert for name, cert in store.certificates if name == alias]
            if not found:
                known = ", ".join(store.aliases()) or "none"
                raise ConfigError(
                    f"{where}[{index}]" if path else where,
                    f"alias '{alias}' is not in the trust store of vault '{self.name}'"
                    f" (aliases: {known})",
                )
            chosen.extend(found)
        return chosen

    def write_pem_pair(
        self, alias: str, directory: str, *, passphrase: bytes | None = None, path: str = ""
    ) -> tuple[str, str]:
        """Write ``alias`` as ``(certfile, keyfile)`` PEM files (mode 0600) in ``directory``.

        The certificate file holds the leaf then its chain. The key is encrypted with
        ``passphrase`` when one is given.
        """
        entry = self.key(alias, path=path)
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(passphrase)
            if passphrase
            else serialization.NoEncryption()
        )
        key_pem = entry.private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
        )
        cert_pem = b"".join(
            cert.public_bytes(serialization.Encoding.PEM)
            for cert in (entry.certificate, *entry.chain)
        )
        stem = "".join(c if c.isalnum() else "_" for c in alias) or "key"
        certfile = os.path.join(directory, f"{stem}.crt.pem")
        keyfile = os.path.join(directory, f"{stem}.key.pem")
        _write_private(certfile, cert_pem)
        _write_private(keyfile, key_pem)
        return certfile, keyfile

    def load_key_into(self, context: ssl.SSLContext, alias: str, *, path: str = "") -> None:
        """``context.load_cert_chain`` with entry ``alias``; no file outlives the call."""
        passphrase = secrets.token_hex(16).encode()
        with tempfile.TemporaryDirectory(prefix="ssegate-key-") as directory:
            certfile, keyfile = self.write_pem_pair(
                alias, directory, passphrase=passphrase, path=path
            )
            context.load_cert_chain(certfile, keyfile, password=passphrase)

    def trust_pem(self, aliases: Sequence[str] | None = None, *, path: str = "") -> str:
        """The chosen trust certificates as one PEM text (for ``load_verify_locations``)."""
        return "".join(
            cert.public_bytes(serialization.Encoding.PEM).decode()
            for cert in self.trust_certs(aliases, path=path)
        )


def build_vault(component: Component, ctx_resolve_path: Callable[[str], str]) -> FilesystemVault:
    """Read every store named in ``component.options``. Raises ConfigError."""
    base = component.path or f"vaults.{component.name}"
    stores: dict[str, Store] = {}
    for kind in STORE_KINDS:
        spec = component.options.get(kind)
        if spec is None:
            continue
        where = f"{base}.options.{kind}"
        if not spec["store"]:  # the schema requires a string, and takes the empty one
            raise ConfigError(f"{where}.store", "a store path is required")
        store_type = spec.get("type", "pkcs12").lower()  # jks is the schema's, not ssegate's
        if store_type != "pkcs12":
            raise ConfigError(
                f"{where}.type",
                f"store type '{store_type}' is not supported; convert it with"
                " 'keytool -importkeystore -deststoretype pkcs12'",
            )
        password = spec.get("password")
        stores[kind] = read_store(
            str(spec["store"]),
            ctx_resolve_path(str(spec["store"])),
            None if password is None else str(password),
            where,
        )
    return FilesystemVault(component.name, stores)


def read_store(shown: str, resolved: str, password: str | None, where: str) -> Store:
    """Read the PKCS#12 file ``resolved`` (named ``shown`` in messages)."""
    try:
        with open(resolved, "rb") as source:
            data = source.read()
    except OSError as exc:
        raise ConfigError(f"{where}.store", f"cannot open '{shown}': {exc.strerror}") from None
    bundle, secret = _load_pkcs12(data, password)
    if bundle is None:
        if not _looks_like_pfx(data):
            raise ConfigError(f"{where}.store", f"'{shown}' is not a PKCS#12 keystore")
        raise ConfigError(f"{where}.password", f"wrong password for '{shown}'")
    certificates: list[tuple[str | None, x509.Certificate]] = []
    for item in ([bundle.cert] if bundle.cert else []) + list(bundle.additional_certs):
        name = item.friendly_name.decode("utf-8", "replace") if item.friendly_name else None
        certificates.append((name, item.certificate))
    keys = _key_entries(data, secret, bundle, certificates)
    return Store(shown, tuple(keys), tuple(certificates))


def _load_pkcs12(
    data: bytes, password: str | None
) -> tuple[pkcs12.PKCS12KeyAndCertificates | None, bytes | None]:
    # An empty password and no password are different things to PKCS#12; accept either.
    attempts: list[bytes | None] = [password.encode()] if password else [None, b""]
    for secret in attempts:
        try:
            return pkcs12.load_pkcs12(data, secret), secret
        except ValueError:
            continue
    return None, None


def _key_entries(
    data: bytes,
    secret: bytes | None,
    bundle: pkcs12.PKCS12KeyAndCertificates,
    certificates: list[tuple[str | None, x509.Certificate]],
) -> list[KeyEntry]:
    """Every key of the store paired with the certificate holding its public key."""
    found: list[tuple[str | None, PrivateKey]] = []
    try:
        found = list(_walk_key_bags(data, secret))
    except (ValueError, IndexError):
        found = []  # not plain DER: fall back to the single key OpenSSL returned
    if bundle.key is not None and not any(
        _public_der(key) == _public_der(bundle.key) for _, key in found
    ):
        name = bundle.cert.friendly_name if bundle.cert else None
        found.insert(0, (name.decode("utf-8", "replace") if name else None, bundle.key))
    entries: list[KeyEntry] = []
    for alias, key in found:
        public = _public_der(key)
        match = next(
            ((name, cert) for name, cert in certificates if _cert_public_der(cert) == public),
            None,
        )
        if match is None:
            continue
        cert_alias, cert = match
        chain = _chain_of(cert, [c for _, c in certificates])
        entries.append(KeyEntry(key, cert, chain, alias or cert_alias))
    return entries


def _chain_of(leaf: x509.Certificate, pool: list[x509.Certificate]) -> tuple[x509.Certificate, ...]:
    chain: list[x509.Certificate] = []
    current = leaf
    while current.issuer != current.subject and len(chain) < 10:
        issuer = next((c for c in pool if c.subject == current.issuer and c not in chain), None)
        if issuer is None or issuer == leaf:
            break
        chain.append(issuer)
        current = issuer
    return tuple(chain)


def _public_der(key: PrivateKey) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _cert_public_der(cert: x509.Certificate) -> bytes:
    return cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


# -- a minimal DER walk of PFX → AuthenticatedSafe → SafeContents → key bags -------------------
# cryptography's load_pkcs12 returns one key per store; the walk finds the others. Key bags sit
# in plain ``data`` contents (each bag is encrypted by itself), which is where OpenSSL, keytool
# and cryptography put them.


def _tlv(data: bytes) -> Iterator[tuple[int, bytes, bytes]]:
    """``(tag, content, whole element)`` for each DER element in ``data``."""
    pos = 0
    while pos < len(data):
        start = pos
        tag = data[pos]
        length = data[pos + 1]
        pos += 2
        if length & 0x80:
            count = length & 0x7F
            if not 0 < count <= 4:
                raise ValueError("unsupported DER length")
            length = int.from_bytes(data[pos : pos + count], "big")
            pos += count
        end = pos + length
        if end > len(data):
            raise ValueError("truncated DER")
        yield tag, data[pos:end], data[start:end]
        pos = end


def _children(content: bytes) -> list[tuple[int, bytes, bytes]]:
    return list(_tlv(content))


def _looks_like_pfx(data: bytes) -> bool:
    try:
        (tag, content, _), *_ = _children(data)
        parts = _children(content)
        return tag == 0x30 and parts[0][0] == 0x02 and parts[0][1] == b"\x03"
    except (ValueError, IndexError):
        return False


def _data_content(content_info: bytes) -> bytes | None:
    """The octets inside a ``data`` ContentInfo, or None for any other content type."""
    oid, explicit = _children(content_info)[:2]
    if oid[1] != _OID_DATA:
        return None
    return _children(explicit[1])[0][1]


def _walk_key_bags(data: bytes, secret: bytes | None) -> Iterator[tuple[str | None, PrivateKey]]:
    (_, pfx, _), *_ = _children(data)
    auth_safe = _data_content(_children(pfx)[1][1])
    if auth_safe is None:
        return
    for _, content_info, _ in _children(_children(auth_safe)[0][1]):
        safe_contents = _data_content(content_info)
        if safe_contents is None:
            continue
        for _, bag, _ in _children(_children(safe_contents)[0][1]):
            parts = _children(bag)
            bag_id = parts[0][1]
            if bag_id not in (_OID_KEY_BAG, _OID_SHROUDED_KEY_BAG):
                continue
            value = _children(parts[1][1])[0][2]
            alias = _friendly_name(parts[2][1]) if len(parts) > 2 else None
            password = secret if bag_id == _OID_SHROUDED_KEY_BAG else None
            try:
                key = serialization.load_der_private_key(value, password)
            except (ValueError, TypeError):
                continue
            yield alias, key


def _friendly_name(attributes: bytes) -> str | None:
    for _, attribute, _ in _children(attributes):
        oid, values = _children(attribute)[:2]
        if oid[1] == _OID_FRIENDLY_NAME:
            bmp = _children(values[1])[0][1]
            return bmp.decode("utf-16-be")
    return None


def _write_private(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)

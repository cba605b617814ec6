"""Throw-away PKI for tests, examples and benchmarks: a CA, a server certificate, PKCS#12 stores.

:func:`write_self_signed` writes a PEM certificate and key for ``localhost`` that sign
themselves; :func:`make_keystore` writes what a ``filesystem`` vault reads:

- ``<name>.p12``: the server key and certificate (friendly name = ``alias``, the way
  ``keytool -genkeypair -alias`` names an entry) with the CA certificate as its chain;
- ``<name>-trust.p12``: the CA certificate alone, as a trusted-certificate entry named ``ca``
  (the Java truststore attribute is set, so ``keytool -list`` shows a ``trustedCertEntry``);
- ``<name>-ca.pem``: the CA certificate in PEM, for clients (``curl --cacert``, ``ssl``).

Nothing here is meant for production keys: the CA's private key is thrown away.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

KeyType = Literal["ec", "rsa"]
CA_ALIAS = "ca"
VALIDITY = datetime.timedelta(days=365)


@dataclass(frozen=True, slots=True)
class CertBundle:
    """Where :func:`make_keystore` wrote its files, and how to open them."""

    keystore: Path
    truststore: Path
    ca_pem: Path
    alias: str
    password: str
    ca_alias: str = CA_ALIAS


def make_keystore(
    path: str | os.PathLike[str],
    *,
    alias: str = "localhost",
    password: str,
    hosts: Sequence[str] = ("localhost", "127.0.0.1"),
    key_type: KeyType = "ec",
) -> CertBundle:
    """Write a keystore for ``hosts`` at ``path``, plus its truststore and CA PEM beside it."""
    keystore = Path(path)
    stem = keystore.name.removesuffix(".p12")
    truststore = keystore.with_name(f"{stem}-trust.p12")
    ca_pem = keystore.with_name(f"{stem}-ca.pem")

    ca_key = _new_key(key_type)
    ca_cert = _ca_certificate(ca_key, f"ssegate test CA for {alias}")
    server_key = _new_key(key_type)
    server_cert = _server_certificate(server_key, ca_key, ca_cert, hosts)

    encryption = serialization.BestAvailableEncryption(password.encode())
    _write_private(
        keystore,
        pkcs12.serialize_key_and_certificates(
            alias.encode(), server_key, server_cert, [ca_cert], encryption
        ),
    )
    _write_private(
        truststore,
        pkcs12.serialize_java_truststore(
            [pkcs12.PKCS12Certificate(ca_cert, CA_ALIAS.encode())], encryption
        ),
    )
    ca_pem.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    return CertBundle(keystore, truststore, ca_pem, alias, password)


def write_self_signed(directory: Path, name: str = "localhost") -> tuple[Path, Path]:
    """Write ``<name>.crt`` and ``<name>.key`` (PEM, EC P-256) into ``directory``: a certificate
    for ``localhost`` and 127.0.0.1 that signs itself, valid for a day."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    _write_private(
        key_path,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
    return cert_path, key_path


def _new_key(key_type: KeyType) -> ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey:
    if key_type == "ec":
        return ec.generate_private_key(ec.SECP256R1())
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    raise ValueError(f"key_type must be 'ec' or 'rsa', not {key_type!r}")


def _ca_certificate(
    key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey, common_name: str
) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )


def _server_certificate(
    key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey,
    ca_key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey,
    ca_cert: x509.Certificate,
    hosts: Sequence[str],
) -> x509.Certificate:
    if not hosts:
        raise ValueError("a server certificate needs at least one host")
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )


def _write_private(path: Path, data: bytes) -> None:
    """Write ``data`` readable by the owner only (a keystore is a secret even when encrypted)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)

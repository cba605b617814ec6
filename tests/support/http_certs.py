"""A self-signed ``localhost`` certificate and the TLS contexts that use it, for HTTP tests."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

from ssegate_lab.testing.certs import write_self_signed


@dataclass(frozen=True)
class CertFiles:
    cert: Path
    key: Path


def make_self_signed(directory: Path) -> CertFiles:
    """Write ``localhost.crt`` and ``localhost.key`` (EC P-256) into ``directory``."""
    return CertFiles(*write_self_signed(directory))


def server_context(files: CertFiles, alpn: list[str]) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(files.cert, files.key)
    context.set_alpn_protocols(alpn)
    return context


def client_context(files: CertFiles, alpn: list[str]) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(files.cert))
    context.set_alpn_protocols(alpn)
    return context

"""The ``tls`` client binding: the client-side :class:`ssl.SSLContext` towards an upstream.

``options{trust, trustcacerts, keys, sni, alpn, version}`` with the binding's ``vault``:

- the peer is verified against the vault's ``trust`` store (the aliases in ``trust``, or the
  whole store), plus the system's CAs when ``trustcacerts: true``; with no vault trust at all,
  against the system's CAs alone. Host names are always checked.
- ``keys``: the first alias is presented as the client certificate (mutual TLS).
- ``sni``: the server name to send and check (first entry); without it the caller's host.
- ``alpn``: the protocols offered.

``exit`` names the ``tcp`` client that carries the connection.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding
from ssegate.engine.context import BuildContext
from ssegate.vaults.vault import Vault

VERSIONS = {
    "TLS": (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.MAXIMUM_SUPPORTED),
    "TLSv1.2": (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2),
    "TLSv1.3": (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_3),
}


@dataclass(frozen=True, slots=True)
class TlsClient:
    name: str
    ssl_context: ssl.SSLContext
    exit: str
    sni: str | None
    alpn: tuple[str, ...]

    def server_hostname(self, host: str) -> str:
        """The name to send as SNI and to check the certificate against, for ``host``."""
        return self.sni or host


def build(binding: Binding, ctx: BuildContext) -> TlsClient:
    options = binding.options
    where = f"{binding.path}.options"
    if not binding.exit:
        raise ConfigError(f"{binding.path}.exit", "a tls client needs an exit (a tcp client)")
    vault: Vault | None = ctx.vault(binding.vault) if binding.vault else None
    versions = VERSIONS[options.get("version", "TLS")]

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version, context.maximum_version = versions
    trust = options.get("trust")
    trust_pem = ""
    if vault is not None:
        trust_pem = vault.trust_pem(trust, path=f"{where}.trust")
    elif trust is not None:
        raise ConfigError(f"{binding.path}.vault", "trust needs a vault")
    if trust_pem:
        context.load_verify_locations(cadata=trust_pem)
    if not trust_pem or options.get("trustcacerts") is True:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)

    keys = options.get("keys")
    if keys is not None:
        if vault is None:
            raise ConfigError(f"{binding.path}.vault", "keys need a vault")
        if keys:
            vault.load_key_into(context, keys[0], path=f"{where}.keys[0]")

    alpn: tuple[str, ...] = ()
    if options.get("alpn") is not None:
        alpn = tuple(options["alpn"])
        context.set_alpn_protocols(list(alpn))
    sni_names = options.get("sni") or []
    return TlsClient(binding.name, context, binding.exit, sni_names[0] if sni_names else None, alpn)

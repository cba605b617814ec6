"""What bindings may ask of a vault, whatever its type: named keys with their certificate
chains, and trusted certificates. The ``filesystem`` vault is one implementation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import ssl

    from ssegate.vaults.filesystem import KeyEntry


class Vault(Protocol):
    @property
    def name(self) -> str: ...

    def entries(self, kind: str = "keys") -> list[KeyEntry]:
        """Every entry of the ``keys`` (or ``signers``) store, in the store's order."""

    def key(self, alias: str, *, path: str = "", kind: str = "keys") -> KeyEntry:
        """Entry ``alias``; a ConfigError at ``path`` when there is none."""

    def trust_pem(self, aliases: Sequence[str] | None = None, *, path: str = "") -> str:
        """The chosen trusted certificates (all without ``aliases``) as one PEM text."""

    def load_key_into(self, context: ssl.SSLContext, alias: str, *, path: str = "") -> None:
        """Load entry ``alias`` (key and chain) into an ``ssl.SSLContext``."""

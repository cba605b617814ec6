"""The ``tls`` server binding: the server-side :class:`ssl.SSLContext`, SNI and ALPN routing.

Built once at start-up from ``options{keys, sni, alpn, version, trust, mutual}`` and the vault:

- ``keys``: aliases in the vault's ``keys`` store (absent: every key of the store). With
  several, the server name a client sends picks the key whose alias or certificate SAN matches
  it; otherwise the first key answers.
- ``sni``: the server names accepted. A client naming another one is refused with an
  ``unrecognized_name`` alert; a client sending no name is accepted (as Zilla does).
- ``alpn``: the protocols offered, in server preference order. Zilla, without the option,
  takes whatever the client prefers; ssegate offers what the next ``http`` binding speaks
  (its ``versions``, default ``h2`` then ``http/1.1``).
- ``version``: ``TLSv1.2`` or ``TLSv1.3`` pins that version; ``TLS`` (default) allows 1.2 and
  1.3. Nothing older is ever accepted.
- ``mutual``: ``required``, ``requested`` or ``none``; with ``trust`` (aliases in the vault's
  trust store) it defaults to ``required``, as in Zilla.

A failed handshake becomes one ``tls.handshake_failed`` event and the metric
``ssegate.tls.handshake.failures`` (label ``reason``). asyncio and uvloop only log these at
debug level, so the context's ``sslobject_class`` reports them from ``do_handshake``. The
``SSLObject`` is not told whose handshake it runs, so there the peer is ``unknown``.
:func:`install_loop_exception_filter` reports the SSL errors that do reach the loop's exception
handler (stdlib asyncio in debug mode, other loops), with the peer of the transport the loop
names; one already reported from ``do_handshake`` is not reported again.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cryptography import x509

from ssegate.bindings.tls.alpn import alpn_factory
from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding
from ssegate.engine.context import BuildContext
from ssegate.engine.listeners import ProtocolFactory
from ssegate.telemetry import log
from ssegate.telemetry.metrics import Metrics
from ssegate.vaults.filesystem import KeyEntry
from ssegate.vaults.vault import Vault

FAILURES_METRIC = "ssegate.tls.handshake.failures"
DEFAULT_ALPN = ("h2", "http/1.1")
MUTUAL_MODES = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}
VERSIONS = {
    "TLS": (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.MAXIMUM_SUPPORTED),
    "TLSv1.2": (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2),
    "TLSv1.3": (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_3),
}


class HandshakeFailures:
    """Turns a failed handshake into the event and the metric, for one binding."""

    def __init__(self, binding: str, metrics: Metrics | None) -> None:
        self.binding = binding
        self.metrics = metrics

    def report(self, peer: str, reason: str, detail: str = "", **fields: Any) -> None:
        log.event(
            "tls.handshake_failed",
            binding=self.binding,
            level=logging.WARNING,
            peer=peer,
            reason=reason,
            detail=detail,
            **fields,
        )
        if self.metrics is not None:
            self.metrics.inc(FAILURES_METRIC, self.binding, reason=reason)


class _RecentFailures:
    """The handshake errors reported from ``do_handshake`` lately, so that the loop's exception
    handler, which a loop in debug mode hands the same error to afterwards, does not report them
    again. An error is known by its identity and its arguments; none is kept alive."""

    def __init__(self, size: int = 64) -> None:
        self._seen: deque[tuple[int, tuple[object, ...]]] = deque(maxlen=size)

    def add(self, exc: BaseException) -> None:
        self._seen.append((id(exc), exc.args))

    def __contains__(self, exc: BaseException) -> bool:
        return (id(exc), exc.args) in self._seen


_REPORTED = _RecentFailures()


def reason_of(exc: BaseException) -> str:
    """A short, bounded reason: OpenSSL's reason code (``wrong_version_number``) if any."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return "certificate_verify_failed"
    if isinstance(exc, ssl.SSLError) and isinstance(exc.reason, str) and exc.reason:
        return exc.reason.lower()
    if isinstance(exc, ConnectionAbortedError) and "handshake" in str(exc):
        return "handshake_timeout"
    return type(exc).__name__.lower()


class _ReportingSSLObject(ssl.SSLObject):
    """An SSLObject that reports its own failed handshake before raising it on."""

    failures: HandshakeFailures
    refused_server_name: str | None = None

    def do_handshake(self) -> None:
        try:
            super().do_handshake()
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise
        except ssl.SSLError as exc:
            extra: dict[str, Any] = {}
            reason = reason_of(exc)
            if self.refused_server_name is not None:
                reason = "sni_not_allowed"
                extra["server_name"] = self.refused_server_name
            self.failures.report("unknown", reason, str(exc), **extra)
            _REPORTED.add(exc)
            raise


def _format_peer(peer: Any) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        host, port = peer[0], peer[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return "unknown" if peer is None else str(peer)


@dataclass(frozen=True, slots=True)
class AlpnRoute:
    """A route: the ALPN protocols it takes (empty: any), and where it leads."""

    protocols: frozenset[str]
    exit: str


@dataclass(frozen=True, slots=True)
class TlsServer:
    name: str
    ssl_context: ssl.SSLContext
    exit: str
    routes: tuple[AlpnRoute, ...]
    alpn: tuple[str, ...]
    sni: frozenset[str] | None

    def exit_for_alpn(self, alpn: str | None) -> str:
        """The binding a connection that negotiated ``alpn`` (None: no ALPN) goes to."""
        for route in self.routes:
            if not route.protocols or (alpn is not None and alpn in route.protocols):
                return route.exit
        return self.exit

    # -- what the runtime's listener needs (ssegate.engine.listeners.TlsTermination) ----------

    def exits(self) -> set[str]:
        return {route.exit for route in self.routes} | {self.exit}

    def dispatch(self, factories: Mapping[str, ProtocolFactory]) -> ProtocolFactory:
        if len(factories) == 1:
            return factories[self.exit]
        return alpn_factory(self.exit_for_alpn, dict(factories))

    def prepare_loop(self, loop: asyncio.AbstractEventLoop, metrics: Metrics) -> None:
        install_loop_exception_filter(loop, metrics)


def build(binding: Binding, ctx: BuildContext) -> TlsServer:
    options = binding.options
    where = f"{binding.path}.options"
    if not binding.vault:
        raise ConfigError(f"{binding.path}.vault", "a tls server needs a vault with its keys")
    vault: Vault = ctx.vault(binding.vault)
    entries = _key_entries(vault, options.get("keys"), f"{where}.keys")
    routes = _routes(binding)
    exit_name = binding.exit or (routes[-1].exit if routes else None)
    if exit_name is None:
        raise ConfigError(f"{binding.path}.exit", "a tls server needs an exit")
    alpn = _alpn(options.get("alpn"), ctx, exit_name)
    sni = _names(options.get("sni"))
    versions = VERSIONS[options.get("version", "TLS")]
    trust_pem = ""
    trust = options.get("trust")
    if trust is not None:
        trust_pem = vault.trust_pem(list(trust), path=f"{where}.trust")
    mutual = options.get("mutual", "required" if trust is not None else "none")
    if mutual != "none" and not trust_pem:
        raise ConfigError(f"{where}.mutual", f"mutual '{mutual}' needs trust certificates")

    failures = HandshakeFailures(binding.name, ctx.metrics)
    reporting = type("ReportingSSLObject", (_ReportingSSLObject,), {"failures": failures})

    def context_for(entry: KeyEntry, alias: str, path: str) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version, context.maximum_version = versions
        context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION
        context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
        vault.load_key_into(context, alias, path=path)
        if alpn:
            context.set_alpn_protocols(list(alpn))
        context.verify_mode = MUTUAL_MODES[mutual]
        if trust_pem:
            context.load_verify_locations(cadata=trust_pem)
        context.sslobject_class = reporting
        return context

    contexts = [context_for(entry, alias, path) for alias, path, entry in entries]
    primary = contexts[0]
    by_name = _names_to_contexts([(alias, e) for alias, _, e in entries], contexts)
    primary.sni_callback = _sni_selector(primary, by_name, sni)
    return TlsServer(binding.name, primary, exit_name, tuple(routes), alpn, sni)


def _key_entries(vault: Vault, keys: Any, where: str) -> list[tuple[str, str, KeyEntry]]:
    """``(alias, yaml path, entry)`` for each key named (or every key of the store)."""
    if keys is None:
        entries = vault.entries("keys")
        if not entries:
            raise ConfigError(where, f"vault '{vault.name}' has no key to serve")
        return [(e.alias or "", where, e) for e in entries]
    aliases = list(keys)
    if not aliases:
        raise ConfigError(where, "at least one key alias is needed")
    found = []
    for index, alias in enumerate(aliases):
        path = f"{where}[{index}]"
        found.append((alias, path, vault.key(alias, path=path)))
    return found


def _names_to_contexts(
    entries: list[tuple[str, KeyEntry]], contexts: list[ssl.SSLContext]
) -> dict[str, ssl.SSLContext]:
    """Server name (lower case; ``*.example.com`` for wildcards) → context, first key wins."""
    table: dict[str, ssl.SSLContext] = {}
    for (alias, entry), context in zip(entries, contexts, strict=True):
        names = [alias] if alias else []
        try:
            san = entry.certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
            names.extend(san.value.get_values_for_type(x509.DNSName))
        except x509.ExtensionNotFound:
            pass
        for name in names:
            table.setdefault(name.lower().rstrip("."), context)
    return table


def _sni_selector(
    primary: ssl.SSLContext, by_name: dict[str, ssl.SSLContext], allowed: frozenset[str] | None
) -> Callable[[ssl.SSLObject, str | None, ssl.SSLContext], int | None]:
    def select(ssl_object: ssl.SSLObject, server_name: str | None, _: ssl.SSLContext) -> int | None:
        if server_name is None:
            return None
        name = server_name.lower().rstrip(".")
        if allowed is not None and name not in allowed:
            if isinstance(ssl_object, _ReportingSSLObject):
                ssl_object.refused_server_name = server_name
            return ssl.ALERT_DESCRIPTION_UNRECOGNIZED_NAME
        parent = name.partition(".")[2]
        chosen = by_name.get(name) or by_name.get(f"*.{parent}")
        if chosen is not None and chosen is not primary:
            ssl_object.context = chosen
        return None

    return select


def _routes(binding: Binding) -> list[AlpnRoute]:
    routes = []
    for route in binding.routes:
        if not route.exit:
            continue
        protocols: set[str] = set()
        for when in route.when:
            if "alpn" in when:
                protocols.add(when["alpn"])
        routes.append(AlpnRoute(frozenset(protocols), route.exit))
    return routes


def _alpn(value: list[str] | None, ctx: BuildContext, exit_name: str) -> tuple[str, ...]:
    if value is not None:
        return tuple(value)
    try:
        following = ctx.binding(exit_name)
    except KeyError:
        return DEFAULT_ALPN
    versions = following.options.get("versions") if following.type == "http" else None
    if not isinstance(versions, list):
        return DEFAULT_ALPN
    return tuple(p for p in DEFAULT_ALPN if p in versions) or DEFAULT_ALPN


def _names(value: list[str] | None) -> frozenset[str] | None:
    if value is None:
        return None
    return frozenset(name.lower().rstrip(".") for name in value)


def install_loop_exception_filter(
    loop: asyncio.AbstractEventLoop, metrics: Metrics | None = None
) -> None:
    """Report SSL handshake errors that reach ``loop``'s exception handler as events.

    A handshake failure already reported by a tls server is dropped; any other SSL handshake
    report becomes ``tls.handshake_failed``; everything else goes to the handler that was
    installed before (or the loop's default handler). Installing it twice changes nothing.
    """
    previous = loop.get_exception_handler()
    if not isinstance(previous, _HandshakeFilter):
        loop.set_exception_handler(_HandshakeFilter(HandshakeFailures("", metrics), previous))


ExceptionHandler = Callable[[asyncio.AbstractEventLoop, dict[str, Any]], object]


class _HandshakeFilter:
    """A loop exception handler: SSL handshake errors become events, the rest goes on."""

    def __init__(self, failures: HandshakeFailures, previous: ExceptionHandler | None) -> None:
        self._failures = failures
        self._previous = previous

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        message = str(context.get("message", ""))
        if isinstance(exc, OSError) and (
            isinstance(exc, ssl.SSLError) or "SSL handshake" in f"{message} {exc}"
        ):
            if exc not in _REPORTED:
                transport = context.get("transport")
                peer = transport.get_extra_info("peername") if transport is not None else None
                self._failures.report(_format_peer(peer), reason_of(exc), str(exc))
            return
        if self._previous is not None:
            self._previous(loop, context)
        else:
            loop.default_exception_handler(context)

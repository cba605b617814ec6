"""Which address a stream is counted against: the TCP peer, or whom a trusted proxy names.

The peer is believed. ``X-Forwarded-For`` is believed only when the peer is one of
``trusted-proxies``: then the client is the right-most address of the header that is not
itself a trusted proxy (each proxy appends the address it was reached from, so entries right of
that one were written by proxies the operator runs, and entries left of it by anyone). When
every entry is a trusted proxy, the left-most is taken. A header a trusted proxy sent that does
not parse (an entry that is not an IP address) counts against the peer, and the caller is told
so it can count it. Addresses are parsed with :mod:`ipaddress`; an IPv4 address mapped into
IPv6 (``::ffff:10.0.0.1``) is the IPv4 address, so one client is one key whichever way its
socket was accepted.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class ClientAddress:
    address: str
    """The address the stream counts against, in :mod:`ipaddress`'s canonical spelling."""
    malformed: bool = False
    """A trusted proxy sent an ``X-Forwarded-For`` that does not parse: the peer was taken."""


def trusted_networks(entries: Iterable[str]) -> tuple[IpNetwork, ...]:
    """``trusted-proxies`` as networks (``10.0.0.0/8``, ``127.0.0.1``); ValueError names a bad
    entry (host bits set, as in ``10.0.0.1/8``, included)."""
    return tuple(ipaddress.ip_network(entry, strict=True) for entry in entries)


def parse_ip(text: str) -> IpAddress | None:
    """``text`` as an address (IPv6 in brackets or not, IPv4-mapped made IPv4); ``None``."""
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def peer_ip(remote: str) -> IpAddress | None:
    """The address of ``host:port`` (``127.0.0.1:50312``, ``::1:50312``), or ``None``."""
    host, colon, port = remote.rpartition(":")
    if not colon or not port.isdigit():
        return parse_ip(remote)
    return parse_ip(host)


def is_trusted(address: IpAddress, trusted: tuple[IpNetwork, ...]) -> bool:
    return any(address.version == net.version and address in net for net in trusted)


def client_address(
    remote: str, forwarded_for: str | None, trusted: tuple[IpNetwork, ...]
) -> ClientAddress:
    """The address to count a request from peer ``remote`` against (see the module doc)."""
    peer = peer_ip(remote)
    if peer is None:
        return ClientAddress(remote)
    if forwarded_for is None or not trusted or not is_trusted(peer, trusted):
        return ClientAddress(str(peer))
    entries = [parse_ip(entry) for entry in forwarded_for.split(",")]
    if not entries or any(entry is None for entry in entries):
        return ClientAddress(str(peer), malformed=True)
    chain = [entry for entry in entries if entry is not None]
    for entry in reversed(chain):
        if not is_trusted(entry, trusted):
            return ClientAddress(str(entry))
    return ClientAddress(str(chain[0]))

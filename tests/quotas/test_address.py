"""The address a stream counts against: the peer, or whom a trusted proxy names."""

from __future__ import annotations

import pytest

from ssegate.quotas.address import ClientAddress, client_address, peer_ip, trusted_networks

TRUSTED = trusted_networks(["10.0.0.0/8", "127.0.0.1/32", "fd00::/8"])


def test_without_trusted_proxies_the_peer_counts_whatever_the_header_says() -> None:
    assert client_address("203.0.113.9:5000", "198.51.100.1", ()) == ClientAddress("203.0.113.9")


def test_an_untrusted_peer_is_counted_itself_and_its_header_is_ignored() -> None:
    found = client_address("203.0.113.9:5000", "198.51.100.1", TRUSTED)
    assert found == ClientAddress("203.0.113.9")


def test_a_trusted_peer_names_the_right_most_address_that_is_not_a_trusted_proxy() -> None:
    found = client_address("10.0.0.2:443", "198.51.100.7, 203.0.113.5, 10.1.1.1", TRUSTED)
    assert found == ClientAddress("203.0.113.5")


def test_when_every_forwarded_address_is_trusted_the_left_most_counts() -> None:
    found = client_address("127.0.0.1:443", "10.9.9.9, 10.1.1.1", TRUSTED)
    assert found == ClientAddress("10.9.9.9")


@pytest.mark.parametrize("header", ["", "not-an-ip", "198.51.100.7,,10.1.1.1", "1.2.3.4:80"])
def test_a_malformed_header_from_a_trusted_proxy_counts_the_peer_and_says_so(header: str) -> None:
    found = client_address("10.0.0.2:443", header, TRUSTED)
    assert found == ClientAddress("10.0.0.2", malformed=True)


def test_ipv6_peers_and_bracketed_entries_parse_and_mapped_ipv4_is_ipv4() -> None:
    assert client_address("fd00::1:443", "[2001:db8::1]", TRUSTED) == ClientAddress("2001:db8::1")
    assert client_address("::ffff:203.0.113.9:443", None, TRUSTED) == ClientAddress("203.0.113.9")
    assert str(peer_ip("::1:50312")) == "::1"


def test_a_peer_that_is_no_address_is_counted_as_given() -> None:
    assert client_address("unix-socket", "198.51.100.1", TRUSTED) == ClientAddress("unix-socket")


def test_trusted_proxies_refuse_networks_with_host_bits_set() -> None:
    with pytest.raises(ValueError, match="has host bits set"):
        trusted_networks(["10.0.0.1/8"])

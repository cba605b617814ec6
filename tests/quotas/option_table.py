"""The entries of ``x-ssegate-quotas`` in the table of every option
(:mod:`tests.config.test_every_option`): where each key's effect is shown, on an sse server;
the refusal an sse client gives the whole block."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

QUOTAS = "tests/test_quotas.py::"
OPTION = "x-ssegate-quotas"
SHOWN_BY = {
    "": "test_a_thousand_streams_from_one_address_over_100_get_exactly_900_refusals",
    ".streams-per-address": "test_a_thousand_streams_from_one_address_over_100_get_exactly_900"
    "_refusals",
    ".streams-per-identity": "test_an_identity_over_its_streams_is_refused_whatever_its_address",
    ".opens-per-identity": "test_an_identity_opening_faster_than_its_rate_waits_for_the_refill",
    ".opens-per-identity.rate": "test_an_identity_opening_faster_than_its_rate_waits_for_the"
    "_refill",
    ".opens-per-identity.per": "test_an_identity_opening_faster_than_its_rate_waits_for_the_refill",
    ".opens-per-identity.burst": "test_an_identity_opening_faster_than_its_rate_waits_for_the"
    "_refill",
    ".trusted-proxies": "test_x_forwarded_for_is_believed_from_a_trusted_proxy_only",
}


def quota_options(
    server: bool, applied: Callable[[str], T], refused: Callable[..., T], message: str
) -> dict[str, T]:
    """``options.x-ssegate-quotas...`` → an ``Applied`` test (server) or a ``Refused`` (client,
    at ``options.x-ssegate-quotas``, saying ``message``)."""
    return {
        f"{OPTION}{key}": applied(QUOTAS + test)
        if server
        else refused(message, at=f"options.{OPTION}")
        for key, test in SHOWN_BY.items()
    }

"""A remote key set: fetched on an unknown kid, refetched in the background once stale."""

from __future__ import annotations

import asyncio
import json

from ssegate.guards.jwks import KeySet
from ssegate.tools.token import public_jwk

from .signing import key


class Issuer:
    """The JWKS document an issuer serves, which the test changes as the issuer would."""

    def __init__(self, *kids: str) -> None:
        self.kids = list(kids)
        self.fetches = 0
        self.down = False

    async def fetch(self, url: str) -> bytes:
        self.fetches += 1
        if self.down:
            raise OSError("connection refused")
        keys = [public_jwk(key("ec"), kid) for kid in self.kids]
        return json.dumps({"keys": keys}).encode()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def key_set(issuer: Issuer, clock: Clock) -> KeySet:
    return KeySet(url="https://issuer/jwks.json", fetch=issuer.fetch, max_age=300, clock=clock)


async def first_fetch(keys: KeySet) -> None:
    fetch = keys.refresh()
    assert fetch is not None
    await fetch


def test_a_withdrawn_key_stops_verifying_once_the_keys_are_stale() -> None:
    async def scenario() -> None:
        issuer, clock = Issuer("old", "new"), Clock()
        keys = key_set(issuer, clock)
        await first_fetch(keys)
        assert keys.key("old") is not None
        issuer.kids = ["new"]
        clock.now = 299.0
        assert keys.key("old") is not None  # fresh: no fetch
        assert issuer.fetches == 1
        clock.now = 300.0
        assert keys.key("old") is not None  # stale: still served while the refetch runs
        await asyncio.sleep(0.01)
        assert issuer.fetches == 2
        assert keys.key("old") is None
        assert keys.key("new") is not None

    asyncio.run(scenario())


def test_a_stale_set_whose_issuer_is_down_keeps_its_keys_and_retries() -> None:
    async def scenario() -> None:
        issuer, clock = Issuer("k"), Clock()
        keys = key_set(issuer, clock)
        await first_fetch(keys)
        issuer.down = True
        clock.now = 300.0
        keys.key("k")
        await asyncio.sleep(0.01)
        assert issuer.fetches == 2
        assert keys.key("k") is not None
        assert keys.last_error is not None and "connection refused" in keys.last_error
        keys.key("k")  # within the retry interval: no new fetch
        await asyncio.sleep(0.01)
        assert issuer.fetches == 2
        issuer.down = False
        clock.now = 301.5
        keys.key("k")
        await asyncio.sleep(0.01)
        assert issuer.fetches == 3
        assert keys.last_error is None

    asyncio.run(scenario())


def test_an_inline_set_is_never_fetched() -> None:
    clock = Clock()
    keys = KeySet({}, clock=clock)
    clock.now = 10_000.0
    assert keys.key("any") is None
    assert keys.refresh() is None

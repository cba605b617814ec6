"""The continuous-authorization policy, pure: challenge time, expiry and what extends."""

from __future__ import annotations

from ssegate.contract.identity import Identity
from ssegate.guards.session import Due, GuardedSession, extension_refused


def grant(
    exp: float, sub: str = "alice", roles: str = "proxy:stream", challenge: float = 0
) -> Identity:
    return Identity(sub, frozenset(roles.split()), expires_at=exp, challenge_at=exp - challenge)


def test_the_challenge_is_due_at_exp_minus_challenge_once_then_expiry() -> None:
    session = GuardedSession("g", grant(100, challenge=10))
    assert session.deadline() == (90, Due.CHALLENGE)
    assert session.due(89.9) is None
    assert session.due(90) is Due.CHALLENGE
    assert session.deadline() == (100, Due.EXPIRE)
    assert session.due(95) is None
    assert session.due(100) is Due.EXPIRE


def test_without_a_challenge_option_the_stream_only_expires() -> None:
    session = GuardedSession("g", grant(100))
    assert session.deadline() == (100, Due.EXPIRE)


def test_an_extension_moves_the_deadlines_and_rearms_the_challenge() -> None:
    session = GuardedSession("g", grant(100, challenge=10))
    assert session.due(91) is Due.CHALLENGE
    assert session.extend(grant(160, roles="proxy:stream extra", challenge=10)) is None
    assert session.deadline() == (150, Due.CHALLENGE)


def test_extensions_need_the_same_identity_a_later_exp_and_no_fewer_roles() -> None:
    current = grant(100, roles="a b")
    assert extension_refused(current, grant(200, sub="bob", roles="a b")) is not None
    assert extension_refused(current, grant(100, roles="a b")) is not None
    assert extension_refused(current, grant(200, roles="a")) == "the answer lacks roles b"
    assert extension_refused(current, grant(200, roles="a b c")) is None

"""Continuous authorization of one long-lived stream: when to challenge, when to end, what extends.

Zilla's rules (reference §5), as plain state with no timers: a stream authorized by an
:class:`~ssegate.contract.identity.Identity` expiring at ``expires_at`` is sent the challenge
event at its ``challenge_at`` (for a ``jwt`` guard ``exp - challenge``; at once when that moment
has already passed; never when it is not before ``expires_at``) and ends at ``expires_at``
unless a challenge answer extended it first. An answer extends the session only when it is the
same identity, it expires later and its roles are not narrower (every role held so far is still
held);
:func:`extension_refused` says why not otherwise. The sse server turns
:meth:`GuardedSession.deadline` into a timer and :meth:`GuardedSession.due` into an event or
the end of the stream.
"""

from __future__ import annotations

from enum import Enum

from ssegate.contract.identity import Identity

CHALLENGE_CONTENT_TYPE = "application/x-challenge-response"
CHALLENGE_EVENT = "challenge"
CHALLENGE_DATA = '{"method":"POST","headers":{"content-type":"application/x-challenge-response"}}'


class Due(Enum):
    CHALLENGE = "challenge"
    EXPIRE = "expire"


def extension_refused(current: Identity, fresh: Identity) -> str | None:
    """Why ``fresh`` cannot extend a session held with ``current``; ``None`` when it can."""
    if fresh.identity != current.identity:
        return "the answer is for another identity"
    if fresh.expires_at <= current.expires_at:
        return "the answer does not expire later than the current token"
    missing = current.roles - fresh.roles
    if missing:
        return f"the answer lacks roles {' '.join(sorted(missing))}"
    return None


class GuardedSession:
    """The authorization state of one stream under one guard."""

    __slots__ = ("challenged", "grant", "guard")

    def __init__(self, guard: str, grant: Identity) -> None:
        self.guard = guard
        self.grant = grant
        self.challenged = False

    @property
    def identity(self) -> str:
        return self.grant.identity

    @property
    def expires_at(self) -> float:
        return self.grant.expires_at

    def deadline(self) -> tuple[float, Due]:
        """When the next step is due (epoch seconds), and which one."""
        grant = self.grant
        if grant.challenge_at < grant.expires_at and not self.challenged:
            return grant.challenge_at, Due.CHALLENGE
        return grant.expires_at, Due.EXPIRE

    def due(self, now: float) -> Due | None:
        """What to do at ``now``: challenge (once per grant), expire, or nothing yet."""
        if now >= self.grant.expires_at:
            return Due.EXPIRE
        at, step = self.deadline()
        if now < at:
            return None
        if step is Due.CHALLENGE:
            self.challenged = True
        return step

    def extend(self, fresh: Identity) -> str | None:
        """Take ``fresh`` as the new grant, or say why not."""
        refused = extension_refused(self.grant, fresh)
        if refused is None:
            self.grant = fresh
            self.challenged = False
        return refused

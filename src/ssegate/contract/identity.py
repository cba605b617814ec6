"""What a guard makes of credentials, whatever the guard type: an identity, or a rejection.

:meth:`~ssegate.contract.guard.Guard.authorize` answers one of the two, and the http server leaves
it in ``request.identities[guard]``. Everything downstream (route roles, ``${guarded[...]}``
templates, challenge and expiry of long-lived streams) reads these values only, so it works the
same for any guard type. Times are seconds since the epoch, as Zilla's guards keep
``expiresAt`` and ``expiringAt``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Identity:
    """Who the credentials say the client is, what they let it do, and until when."""

    identity: str
    """The principal (a JWT's ``sub``, say); ``${guarded['g'].identity}`` in templates."""
    roles: frozenset[str] = frozenset()
    """What a route's ``guarded`` role names are checked against."""
    attributes: Mapping[str, str] = field(default_factory=dict)
    """``${guarded['g'].attributes.<name>}`` in templates."""
    expires_at: float = float("inf")
    """When the credentials stop being valid: a stream they authorized ends then."""
    challenge_at: float = float("inf")
    """When a stream they authorized is sent the challenge event asking for fresh credentials;
    no challenge when this is not before :attr:`expires_at`."""


@dataclass(frozen=True, slots=True)
class CredentialsRejected:
    """Credentials were presented to a guard and refused."""

    reason: str
    """Why, safe to log and to answer with (it never quotes the credentials whole)."""
    refreshable: bool = False
    """The guard might accept them once :meth:`~ssegate.contract.guard.Guard.refresh` is done
    (a JWT naming a key the guard does not hold yet)."""


Authorization = Identity | CredentialsRejected
"""What a guard made of the credentials a request carried."""

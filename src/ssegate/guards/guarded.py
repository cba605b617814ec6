"""A route's ``guarded`` checked against the built guards: :class:`Guarded`.

What the route asks (the guards and the roles each must find, ``${method}`` and ``${path}`` in
role names) is :class:`~ssegate.config.guarded.GuardedRoles`, compiled with the config;
:meth:`Guarded.check` answers what :func:`~ssegate.guards.check_guarded` does for the roles
this request asks for, and :meth:`Guarded.admit` also hands back the request to pass on, which
names the route's guards in ``authorized_by`` (a request is never changed once built); a
layer further on hands that request back to the one that keeps the stream authorized through
an :class:`AdmissionRecord`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import NamedTuple, Protocol, runtime_checkable

from ssegate.config.guarded import GuardedRoles
from ssegate.contract.exchange import Request
from ssegate.contract.guard import Guard
from ssegate.guards import Refusal, check_guarded


class Guarded(GuardedRoles):
    """A route's ``guarded``, compiled, and checked against the guards per request."""

    __slots__ = ()

    def check(self, request: Request, guards: Mapping[str, Guard]) -> Refusal | None:
        """``None`` when every guard accepts ``request`` with the roles asked of it
        (``guards``: the built guards, by name; each of this route's is there)."""
        if not self:
            return None
        return check_guarded(request.identities, self.required(request), guards)

    def admit(self, request: Request, guards: Mapping[str, Guard]) -> Admission:
        """:meth:`check`; on success the request to pass on records this route's guards in
        ``authorized_by``, so the stream it opens is kept authorized under them (a copy:
        ``request`` itself is left as it was, and is what a refusal hands back)."""
        refusal = self.check(request, guards)
        if refusal is not None or not self:
            return Admission(request, refusal)
        added = {name: guards[name] for name in self}
        admitted = dataclasses.replace(request, authorized_by={**request.authorized_by, **added})
        return Admission(admitted, None)


class Admission(NamedTuple):
    """What :meth:`Guarded.admit` decided: the request to pass on, and why not (``None``: it
    may pass)."""

    request: Request
    refusal: Refusal | None


@runtime_checkable
class AdmissionRecord(Protocol):
    """Where a layer further on (the sse-kafka proxy's route) leaves the request its guarded
    route admitted, for the layer that keeps the stream authorized (the sse server's stream,
    under every guard in the request's ``authorized_by``)."""

    def admitted(self, request: Request) -> None:
        """``request``, as a guarded route further on admitted it."""

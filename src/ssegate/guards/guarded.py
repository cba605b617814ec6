"""A route's ``guarded`` checked against the built guards: :class:`Guarded`.

What the route asks (the guards and the roles each must find, ``${method}`` and ``${path}`` in
role names) is :class:`~ssegate.config.guarded.GuardedRoles`, compiled with the config;
:meth:`Guarded.check` answers what :func:`~ssegate.guards.check_guarded` does for the roles
this request asks for.
"""

from __future__ import annotations

from collections.abc import Mapping

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

    def admit(self, request: Request, guards: Mapping[str, Guard]) -> Refusal | None:
        """:meth:`check`, and on success record this route's guards in
        ``request.authorized_by``, so the stream the request opens is kept authorized under
        them."""
        refusal = self.check(request, guards)
        if refusal is None:
            for name in self:
                request.authorized_by[name] = guards[name]
        return refusal

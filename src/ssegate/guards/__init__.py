"""Guards: who a request is, and whether a ``guarded`` route lets it through.

The http server's ``authorization`` looks credentials up and asks the guard
(:class:`~ssegate.contract.guard.Guard`, whatever its type); what it learns is left in
``request.identities[guard]``: an :class:`~ssegate.contract.identity.Identity` when the
credentials verified, a :class:`~ssegate.contract.identity.CredentialsRejected` (with the reason)
when they were given but did not verify, nothing when there were none. :func:`check_guarded`
turns that into the answer a guarded route gives, Zilla's way: **401** without credentials,
**403** with bad credentials or without the roles the route names, with ``www-authenticate``
naming the guard's scheme. The same check serves http, sse, sse-kafka and
http-filesystem routes, through a route's compiled ``guarded``
(:class:`~ssegate.guards.guarded.Guarded`, role names with ``${method}`` and ``${path}``); a
stream it lets through stays authorized under that guard (:mod:`ssegate.guards.streams`). The
body of the answer names the guard and says how to present credentials, as the http server's
``options.authorization`` configures them (``request.credentials_hints``)::

    no credentials for guard 'authn_jwt': send "Authorization: Bearer <token>"
    guard 'authn_jwt' refused the token: token has expired; send one it accepts as "Authorization:
    Bearer <token>" or ?access_token=<token>
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from ssegate.contract.exchange import Request, ResponseStream, simple_response
from ssegate.contract.guard import Guard
from ssegate.contract.identity import Authorization, CredentialsRejected
from ssegate.telemetry import log

__all__ = ["Refusal", "answer_refusal", "check_guarded"]

_NOT_IN_DESCRIPTION = re.compile(r"[^\x20\x21\x23-\x5b\x5d-\x7e]")
"""What RFC 6750 §3 keeps out of ``error_description``: all but printable ASCII, ``"``, ``\\``."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a guarded route turns a request away, and how to answer."""

    status: int
    guard: str
    reason: str
    error: str | None = None
    """The RFC 6750 error code: ``invalid_token``, ``insufficient_scope``; none for 401."""
    scheme: str = field(kw_only=True)
    """The guard's authentication scheme (:attr:`~ssegate.contract.guard.Guard.scheme`)."""

    def body(self, request: Request) -> str:
        """What the answer says: the guard, why, and how to send credentials it accepts."""
        hint = (request.credentials_hints or {}).get(self.guard)
        if self.status != 401:
            told = f"guard '{self.guard}' refused the token: {self.reason}"
            return f"{told}; send one it accepts as {hint}" if hint else told
        if hint:
            return f"no credentials for guard '{self.guard}': send {hint}"
        return (
            f"no credentials for guard '{self.guard}': the http server's options.authorization"
            " does not say where to send them"
        )

    def www_authenticate(self) -> str:
        """The ``www-authenticate`` value (RFC 6750 §3): no error code without credentials.

        The reason may quote a token's values; in the header, a double quote becomes ``'``, a
        backslash goes, and any other character RFC 6750 leaves out (control characters, all
        but ASCII) becomes ``?``. The body and the log line keep the reason as it is.
        """
        value = f'{self.scheme} realm="{self.guard}"'
        if self.error is not None:
            quoted = self.reason.replace("\\", "").replace('"', "'")
            description = _NOT_IN_DESCRIPTION.sub("?", quoted)
            value += f', error="{self.error}", error_description="{description}"'
        return value


def check_guarded(
    identities: Mapping[str, Authorization],
    required: Mapping[str, Collection[str]],
    guards: Mapping[str, Guard],
) -> Refusal | None:
    """``None`` when every guard of the route accepts the request with the roles it names
    (role expressions already evaluated: :class:`~ssegate.guards.guarded.Guarded`);
    ``guards`` are the built guards by name, for the scheme a refusal names."""
    for guard, roles in required.items():
        scheme = guards[guard].scheme
        established = identities.get(guard)
        if established is None:
            return Refusal(401, guard, "no credentials", scheme=scheme)
        if isinstance(established, CredentialsRejected):
            return Refusal(403, guard, established.reason, "invalid_token", scheme=scheme)
        missing = sorted(set(roles) - established.roles)
        if missing:
            return Refusal(
                403,
                guard,
                f"token lacks roles {' '.join(missing)}",
                "insufficient_scope",
                scheme=scheme,
            )
    return None


def answer_refusal(
    stream: ResponseStream, refusal: Refusal, *, binding: str, request: Request
) -> None:
    """Log ``refusal`` (never the token) and answer it with ``www-authenticate``."""
    log.warning(
        "guard.refused",
        binding=binding,
        guard=refusal.guard,
        status=refusal.status,
        reason=refusal.reason,
        method=request.method,
        path=request.path,
        remote=request.remote,
    )
    headers = [("www-authenticate", refusal.www_authenticate())]
    simple_response(stream, refusal.status, f"{refusal.body(request)}\n".encode(), headers)

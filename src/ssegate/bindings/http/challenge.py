"""The http server's ``options.authorization``: each guard and where its credentials are
(:class:`GuardCredentials`), and the challenge answers they take.

A challenge answer (``POST``, ``content-type: application/x-challenge-response``,
:func:`~ssegate.guards.streams.is_challenge_answer`) is taken by the http server before any
route, as Zilla does: :func:`challenge_outcomes` hands each guard's fresh token to the streams
the guard keeps authorized (:mod:`ssegate.guards.streams`), or refuses the answer at once (401
without credentials, 403 with credentials the guard rejected); :func:`answer_challenge` answers
204 once every guard's token extended a stream somewhere, else 403 with the reason. For an
HTTP/1.1 answer the streams may be in the other processes sharing the listening address
(:mod:`ssegate.guards.relay`): their replies are futures, which the server awaits
(:func:`pending`) before it answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from ssegate.contract.exchange import Request, ResponseStream, simple_response
from ssegate.contract.guard import Answered, Guard, RelayedAnswer
from ssegate.contract.identity import Identity
from ssegate.guards import Refusal, answer_refusal, check_guarded
from ssegate.guards.credentials import CredentialsLookup
from ssegate.telemetry import log


class GuardCredentials:
    """One entry of ``options.authorization``: a built guard and where its credentials are."""

    __slots__ = ("guard", "lookup", "name")

    def __init__(self, name: str, guard: Guard, lookup: CredentialsLookup) -> None:
        self.name = name
        self.guard = guard
        self.lookup = lookup


Outcome = tuple[GuardCredentials, "asyncio.Future[RelayedAnswer] | Answered"]
"""A challenge answer's outcome for one guard of ``options.authorization``: here, or once the
other processes sharing the address replied."""


def challenge_outcomes(
    authorization: list[GuardCredentials],
    guards: Mapping[str, Guard],
    request: Request,
    stream: ResponseStream,
    binding: str,
) -> list[Outcome] | None:
    """A challenge answer, before any route: each guard's fresh token extends the streams
    the guard keeps authorized, here and, for an HTTP/1.1 answer, in the other processes
    sharing the listening address (:mod:`ssegate.guards.relay`), whose replies are futures.
    ``None`` when a guard accepts no token of the answer: it is refused here."""
    http2 = request.version == "2"
    outcomes: list[Outcome] = []
    for entry in authorization:
        refusal = check_guarded(request.identities, {entry.name: ()}, guards)
        fresh = request.identities.get(entry.name)
        if refusal is not None:
            answer_refusal(stream, refusal, binding=binding, request=request)
            return None
        if not isinstance(fresh, Identity):  # cannot be: check_guarded found an identity
            continue
        here = entry.guard.streams.answer(fresh, connection_id=request.connection_id, http2=http2)
        relay = entry.guard.streams.relay
        token = entry.lookup.find(request)
        if http2 or relay is None or token is None:
            outcomes.append((entry, here))
        else:
            outcomes.append((entry, relay.relay(entry.name, token, fresh, here)))
    return outcomes


def pending(outcomes: list[Outcome]) -> list[asyncio.Future[RelayedAnswer]]:
    """The outcomes still waiting for the other processes' replies."""
    return [o for _, o in outcomes if isinstance(o, asyncio.Future) and not o.done()]


def answer_challenge(
    outcomes: list[Outcome], request: Request, stream: ResponseStream, binding: str
) -> None:
    """Answer once every outcome is known: 204 when every guard's token extended a stream
    somewhere, else the first refusal (403)."""
    extended = relayed = 0
    for entry, outcome in outcomes:
        done = outcome.result() if isinstance(outcome, asyncio.Future) else outcome
        if not done.extended:
            refusal = Refusal(
                403,
                entry.name,
                done.reason or "nothing to extend",
                "invalid_token",
                scheme=entry.guard.scheme,
            )
            answer_refusal(stream, refusal, binding=binding, request=request)
            return
        extended += done.extended
        relayed += done.relayed if isinstance(done, RelayedAnswer) else 0
    log.event(
        "guard.authorization_extended",
        binding=binding,
        streams=extended,
        elsewhere=relayed,
        remote=request.remote,
    )
    simple_response(stream, 204)

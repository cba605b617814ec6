"""A coroutine stepped by hand, each step within the loop turn's budget: :func:`run_eagerly`.

The http server decides a request as one coroutine that reads top to bottom (CORS, guards,
challenge answer, route, checks, exit), but almost every request waits for nothing: it is
decided in the very callback that parsed it. Run as an :class:`asyncio.Task`, each request
would cost a Task and at least one more turn of the loop, and its first step would run in that
later turn, outside the budget of :mod:`ssegate.host.turns` that makes a crowd of new requests
take turns with the streams already open. Python 3.12's eager task factory starts a task's
first step at once; Python 3.11 has none, and this small driver stands in for what the http
server needs of one.

:func:`run_eagerly` makes the coroutine and steps it (``send(None)``) inside one
:meth:`TurnBudget.run <ssegate.host.turns.TurnBudget.run>`, so it starts at once within the
turn's budget or, past it, in a later turn with the work that waits: a coroutine that awaits
nothing finishes there, with no Task and no extra turn. One that awaits an asyncio future (or a
coroutine that does, such as :func:`asyncio.wait` or :func:`asyncio.gather`) is continued from
that future's done-callback, again through the budget. A bare ``yield`` (``asyncio.sleep(0)``)
continues in the next turn; anything else it yields is thrown back into it as a
``RuntimeError``, as a Task would.

An exception the coroutine lets out goes to whoever stepped it: the caller of
:func:`run_eagerly` for the first step, the loop's exception handler for a later one. A
coroutine that must not fail catches its own (the http server turns any into a 500). Nothing
here can cancel the coroutine: it ends when it returns, or is closed with the future it waits
for, whose callback alone holds it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from ssegate.host.turns import TurnBudget

Steps = Coroutine[Any, Any, None]
"""A coroutine to run eagerly: what it returns is dropped."""


def run_eagerly(turns: TurnBudget, start: Callable[[], Steps]) -> bool:
    """Make the coroutine ``start()`` returns and run it step by step, each step within
    ``turns``' budget. True when the first step ran at once, False when it waits for a later
    turn (the coroutine is not made until then)."""
    return turns.run(_Stepper(turns, start).first)


class _Stepper:
    """One coroutine's steps: the first makes it, each later one is due when what it awaited
    is done."""

    __slots__ = ("_coroutine", "_start", "_turns")

    def __init__(self, turns: TurnBudget, start: Callable[[], Steps]) -> None:
        self._turns = turns
        self._start = start
        self._coroutine: Steps | None = None

    def first(self) -> None:
        self._coroutine = self._start()
        self._step()

    def _due(self, _: object = None) -> None:
        self._turns.run(self._step)

    def _step(self) -> None:
        coroutine = self._coroutine
        assert coroutine is not None
        error: BaseException | None = None
        while True:
            try:
                yielded = coroutine.send(None) if error is None else coroutine.throw(error)
            except StopIteration:
                return
            if asyncio.isfuture(yielded):
                yielded._asyncio_future_blocking = False  # taken, as a Task takes it
                yielded.add_done_callback(self._due)
                return
            if yielded is None:
                asyncio.get_running_loop().call_soon(self._due)
                return
            error = RuntimeError(f"a coroutine run eagerly yielded {yielded!r}, not a future")

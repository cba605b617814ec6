"""A coroutine run eagerly within the loop turn's budget: it finishes inside the call when it
waits for nothing, goes on from the done-callback of what it awaits, and never starts outside
the budget. A real event loop; the budget's clock is the test's."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ssegate.host.eager import run_eagerly
from ssegate.host.turns import TurnBudget


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_coroutine_that_waits_for_nothing_finishes_inside_the_call_without_a_task() -> None:
    async def scenario() -> None:
        done: list[str] = []
        tasks = asyncio.all_tasks()

        async def steps() -> None:
            done.append("first")
            await asyncio.gather()  # an awaitable that is done at once: no wait
            done.append("last")

        assert run_eagerly(TurnBudget(0.002, Clock()), steps)
        assert done == ["first", "last"]
        assert asyncio.all_tasks() == tasks

    asyncio.run(scenario())


def test_a_coroutine_goes_on_once_the_future_it_awaits_is_done() -> None:
    async def scenario() -> None:
        fetched: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        done: list[str] = []

        async def steps() -> None:
            done.append("asked")
            done.append(await fetched)

        assert run_eagerly(TurnBudget(0.002, Clock()), steps)
        assert done == ["asked"]
        await asyncio.sleep(0)
        assert done == ["asked"]  # still waiting
        fetched.set_result("keys")
        for _ in range(3):
            await asyncio.sleep(0)
        assert done == ["asked", "keys"]

    asyncio.run(scenario())


def test_past_the_budget_the_coroutine_is_not_even_made_until_a_later_turn() -> None:
    async def scenario() -> None:
        clock = Clock()
        budget = TurnBudget(0.002, clock)
        made: list[int] = []

        def costly(n: int) -> Any:
            async def steps() -> None:
                made.append(n)
                clock.now += 0.001

            made.append(-n)  # the coroutine is made
            return steps()

        ran = [run_eagerly(budget, lambda n=n: costly(n)) for n in range(1, 4)]
        assert ran == [True, True, False]
        assert made == [-1, 1, -2, 2]
        await asyncio.sleep(0)
        assert made == [-1, 1, -2, 2, -3, 3]
        assert budget.deferred == 1

    asyncio.run(scenario())


def test_a_step_due_after_a_future_waits_its_turn_when_the_budget_is_spent() -> None:
    async def scenario() -> None:
        clock = Clock()
        budget = TurnBudget(0.002, clock)
        fetched: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done: list[str] = []

        async def steps() -> None:
            await fetched
            done.append("resumed")

        run_eagerly(budget, steps)
        # In the turn the future's callback runs in, a crowd spends the budget just before it.
        crowd = lambda: setattr(clock, "now", clock.now + 0.005)  # noqa: E731
        asyncio.get_running_loop().call_soon(budget.run, crowd)
        fetched.set_result(None)
        await asyncio.sleep(0)
        assert done == [] and budget.deferred == 1
        for _ in range(3):
            await asyncio.sleep(0)
        assert done == ["resumed"]

    asyncio.run(scenario())


def test_without_a_budget_every_step_runs_at_once() -> None:
    """``SSEGATE_TURNS=off``: the shared budget is none."""

    async def scenario() -> None:
        budget = TurnBudget(None)
        done: list[int] = []

        async def steps(n: int) -> None:
            done.append(n)

        assert all(run_eagerly(budget, lambda n=n: steps(n)) for n in range(100))
        assert done == list(range(100)) and budget.deferred == 0

    asyncio.run(scenario())


def test_a_bare_yield_goes_on_in_the_next_turn() -> None:
    async def scenario() -> None:
        done: list[str] = []

        async def steps() -> None:
            await asyncio.sleep(0)
            done.append("next turn")

        run_eagerly(TurnBudget(0.002, Clock()), steps)
        assert done == []
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert done == ["next turn"]

    asyncio.run(scenario())


def test_an_exception_in_the_first_step_reaches_the_caller() -> None:
    async def steps() -> None:
        raise KeyError("first")

    with pytest.raises(KeyError):
        run_eagerly(TurnBudget(None), steps)


def test_an_exception_after_a_wait_reaches_the_loop_exception_handler() -> None:
    async def scenario() -> list[dict[str, Any]]:
        loop = asyncio.get_running_loop()
        reported: list[dict[str, Any]] = []
        loop.set_exception_handler(lambda _, context: reported.append(context))
        fetched: asyncio.Future[None] = loop.create_future()

        async def steps() -> None:
            await fetched
            raise KeyError("after the wait")

        run_eagerly(TurnBudget(0.002, Clock()), steps)
        fetched.set_result(None)
        for _ in range(3):
            await asyncio.sleep(0)
        return reported

    reported = asyncio.run(scenario())
    assert [type(r.get("exception")) for r in reported] == [KeyError]


def test_a_yield_that_is_not_a_future_is_thrown_back_into_the_coroutine() -> None:
    class Odd:
        def __await__(self) -> Any:
            yield "not a future"

    async def steps() -> None:
        try:
            await Odd()
        except RuntimeError as exc:
            caught.append(str(exc))

    caught: list[str] = []
    run_eagerly(TurnBudget(None), steps)
    assert caught == ["a coroutine run eagerly yielded 'not a future', not a future"]

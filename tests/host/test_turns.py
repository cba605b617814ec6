"""The loop turn's budget for deferrable work: what runs at once, what waits, and in what order.
A real event loop; the clock is the test's, moved by the work itself."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ssegate.host.turns import TurnBudget


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def costing(clock: Clock, seconds: float, done: list[str], name: str) -> Callable[[], None]:
    """Work that takes ``seconds`` of the test's clock and records that it ran."""

    def work() -> None:
        clock.now += seconds
        done.append(name)

    return work


def test_without_a_running_loop_work_runs_at_once() -> None:
    budget = TurnBudget(0.002, Clock())
    done: list[str] = []
    assert budget.run(lambda: done.append("a"))
    assert done == ["a"] and budget.deferred == 0


def test_work_past_the_budget_waits_for_a_later_turn_behind_what_was_queued_meanwhile() -> None:
    async def scenario() -> tuple[list[str], list[bool], int]:
        clock = Clock()
        budget = TurnBudget(0.002, clock)
        loop = asyncio.get_running_loop()
        done: list[str] = []
        ran = [budget.run(costing(clock, 0.001, done, f"open{i}")) for i in range(6)]
        # Queued after the crowd arrived, like a batch handed over by the Kafka thread.
        loop.call_soon(done.append, "batch")
        assert done == ["open0", "open1"]  # the turn's budget: 2 ms
        for _ in range(10):
            await asyncio.sleep(0)
        return done, ran, budget.deferred

    done, ran, deferred = asyncio.run(scenario())
    assert ran == [True, True, False, False, False, False]
    assert deferred == 4
    # The batch does not wait for the whole crowd: a later turn runs up to the budget, in order.
    assert done.index("batch") < done.index("open5")
    assert [name for name in done if name != "batch"] == [f"open{i}" for i in range(6)]


def test_each_later_turn_runs_up_to_its_budget_and_lets_others_go_first() -> None:
    async def scenario() -> list[str]:
        clock = Clock()
        budget = TurnBudget(0.002, clock)
        loop = asyncio.get_running_loop()
        done: list[str] = []
        for i in range(9):
            budget.run(costing(clock, 0.001, done, f"open{i}"))

        def ticking() -> None:  # something else the loop does every turn
            done.append("tick")
            if len(budget):
                loop.call_soon(ticking)

        loop.call_soon(ticking)
        for _ in range(20):
            await asyncio.sleep(0)
        return done

    done = asyncio.run(scenario())
    later = " ".join(done[done.index("tick") :]).split("tick")
    opens_between_ticks = [len(part.split()) for part in later if part.strip()]
    assert opens_between_ticks and max(opens_between_ticks) <= 2  # 2 ms of 1 ms work each
    assert [name for name in done if name != "tick"] == [f"open{i}" for i in range(9)]


def test_a_new_turn_runs_work_at_once_again() -> None:
    async def scenario() -> list[bool]:
        clock = Clock()
        budget = TurnBudget(0.002, clock)
        done: list[str] = []
        first = [budget.run(costing(clock, 0.003, done, "a")), budget.run(lambda: None)]
        for _ in range(5):
            await asyncio.sleep(0)
        return [*first, budget.run(lambda: None)]

    assert asyncio.run(scenario()) == [True, False, True]


def test_work_that_raises_leaves_the_rest_waiting_to_run() -> None:
    async def scenario() -> list[str]:
        clock = Clock()
        budget = TurnBudget(0.002, clock)
        loop = asyncio.get_running_loop()
        errors: list[object] = []
        loop.set_exception_handler(lambda _, context: errors.append(context["exception"]))
        done: list[str] = []
        budget.run(costing(clock, 0.003, done, "a"))

        def fails() -> None:
            raise RuntimeError("boom")

        budget.run(fails)
        budget.run(costing(clock, 0.0, done, "c"))
        for _ in range(5):
            await asyncio.sleep(0)
        assert len(errors) == 1
        return done

    assert asyncio.run(scenario()) == ["a", "c"]


def test_work_left_waiting_on_a_loop_that_is_gone_does_not_hold_up_the_next_loop() -> None:
    clock = Clock()
    budget = TurnBudget(0.002, clock)
    done: list[str] = []

    loop = asyncio.SelectorEventLoop()  # asyncio's own: its stop() ends the turn under way

    def crowd() -> None:
        budget.run(costing(clock, 0.003, done, "a"))
        budget.run(costing(clock, 0.0, done, "left"))  # waits for a turn that never comes:
        loop.stop()  # the loop stops after this turn, and is closed

    loop.call_soon(crowd)
    loop.run_forever()
    loop.close()
    assert done == ["a"] and len(budget) == 1

    async def later() -> bool:
        return budget.run(costing(clock, 0.0, done, "b"))

    assert asyncio.run(later())  # at once: nothing waits on this loop
    assert done == ["a", "b"] and len(budget) == 0


def test_a_budget_of_none_runs_every_piece_of_work_at_once() -> None:
    async def scenario() -> list[int]:
        budget = TurnBudget(None)
        ran: list[int] = []
        for n in range(1_000):
            assert budget.run(lambda n=n: ran.append(n))
        return ran

    assert asyncio.run(scenario()) == list(range(1_000))

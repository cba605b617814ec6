"""The shared memory: counts taken in one process are seen by another forked from it, and a
process that dies holding the lock does not keep it."""

from __future__ import annotations

import os

from ssegate.config.model import Binding, Config
from ssegate.quotas import shared
from ssegate.quotas.shared import QuotaMemory, wants_quotas
from ssegate.quotas.table import ADMITTED, digest


def _in_child(work: object) -> int:
    pid = os.fork()
    if pid == 0:
        try:
            work()  # type: ignore[operator]
        finally:
            os._exit(0)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def test_counts_taken_in_a_forked_process_are_seen_by_its_parent() -> None:
    memory = QuotaMemory(counter_slots=64, bucket_slots=64)
    key = digest("address 10.0.0.1")

    def take_two() -> None:
        with memory.locked() as held:
            held.counters.acquire([(key, 5)])
            held.counters.acquire([(key, 5)])

    assert _in_child(take_two) == 0
    with memory.locked() as held:
        assert held.counters.count(key) == 2
        assert held.counters.acquire([(key, 3)]) == ADMITTED
        assert held.counters.acquire([(key, 3)]) == 0


def test_a_process_that_dies_holding_the_lock_releases_it() -> None:
    memory = QuotaMemory(counter_slots=64, bucket_slots=64)

    def die_locked() -> None:
        with memory.locked():
            os._exit(9)

    assert _in_child(die_locked) == 9
    with memory.locked() as held:  # would block for ever were the lock still held
        assert held.counters.keys() == 0


def test_memory_is_prepared_before_the_fork_only_for_a_config_with_quotas() -> None:
    plain = Config("c", {"s": Binding("s", "sse", "server", options={"keepalive": 5})})
    quoted = Config("c", {"s": Binding("s", "sse", "server", options={shared.OPTION: {}})})
    assert not wants_quotas(plain) and wants_quotas(quoted)
    assert shared.attach() is not shared.attach()  # unprepared: each build its own

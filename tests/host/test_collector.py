"""The garbage collector's schedule in a gateway process: long-lived objects frozen, full
collections only on growth (:mod:`ssegate.host.collector`).

The schedule's decisions are pure and tested as such; the policy itself changes the process's
collector, so it is run against CPython's real one in a process of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

from ssegate.host.collector import FreePagesReturn, FullCollectionSchedule

MIB = 2**20


def test_no_full_collection_is_due_while_memory_stays_flat() -> None:
    schedule = FullCollectionSchedule(baseline=400 * MIB, last=0.0, max_interval=3600.0)
    assert schedule.due(400 * MIB, 10.0) is None
    assert schedule.due(480 * MIB, 3599.0) is None  # +20 %


def test_a_full_collection_is_due_once_memory_grew_by_a_quarter() -> None:
    schedule = FullCollectionSchedule(baseline=400 * MIB, last=0.0)
    assert schedule.due(500 * MIB, 1.0) == "growth"


def test_growth_below_the_floor_makes_none_due_in_a_small_process() -> None:
    schedule = FullCollectionSchedule(baseline=40 * MIB, last=0.0, floor=32 * MIB)
    assert schedule.due(60 * MIB, 1.0) is None  # +50 %, but 20 MiB
    assert schedule.due(72 * MIB, 1.0) == "growth"


def test_the_longest_interval_makes_one_due_and_zero_means_no_bound() -> None:
    assert FullCollectionSchedule(100 * MIB, 0.0, max_interval=60.0).due(100 * MIB, 60.0) == (
        "interval"
    )
    assert FullCollectionSchedule(100 * MIB, 0.0, max_interval=0.0).due(100 * MIB, 1e9) is None


def test_a_full_collection_measures_growth_from_what_it_left() -> None:
    schedule = FullCollectionSchedule(baseline=400 * MIB, last=0.0)
    schedule.ran(500 * MIB, 30.0)
    assert schedule.due(600 * MIB, 31.0) is None  # +20 % of 500
    assert schedule.due(625 * MIB, 31.0) == "growth"


def test_growth_the_streams_opened_account_for_makes_no_full_collection_due() -> None:
    schedule = FullCollectionSchedule(
        baseline=60 * MIB, last=0.0, floor=0, streams=0, stream_margin=1.0
    )
    # 2,048 streams opened, 40 MiB: the collection finds nothing, so each took 20 KiB
    schedule.ran(100 * MIB, 1.0, reclaimed=0, walked=500_000, streams=2_048)
    assert schedule.per_stream == 20 * 1024
    # 12,288 more streams: 240 MiB, all of it theirs
    assert schedule.due(340 * MIB, 2.0, streams=14_336) is None
    # 2,048 of them closed: the memory they took is not growth
    assert schedule.due(340 * MIB, 3.0, streams=12_288) is None
    # as many new ones in their place: what they take is (40 MiB, +40 % < 50 %; then 60 MiB)
    assert schedule.due(380 * MIB, 4.0, streams=14_336) is None
    assert schedule.due(400 * MIB, 4.0, streams=14_336) == "growth"


def test_streams_that_grow_once_they_stream_make_no_full_collection_due() -> None:
    # a worker of the 100,000-stream run: 2,500 streams opened in 92 MiB took 13.5 KiB
    # each; once 16,700 streamed they held 17.1 KiB each
    schedule = FullCollectionSchedule(baseline=59 * MIB, last=0.0, floor=0)
    schedule.ran(92 * MIB, 1.0, reclaimed=0, walked=254_000, streams=2_500)
    assert round(schedule.per_stream / 1024, 1) == 13.5
    streaming = 92 * MIB + (16_700 - 2_500) * 17.1 * 1024
    assert schedule.due(int(streaming), 2.0, streams=16_700) is None
    assert (
        FullCollectionSchedule(**{**_fields(schedule), "stream_margin": 1.0}).due(
            int(streaming), 2.0, streams=16_700
        )
        == "growth"
    )  # counted at what they held while opening: due, for no garbage


def _fields(schedule: FullCollectionSchedule) -> dict[str, object]:
    return {name: getattr(schedule, name) for name in FullCollectionSchedule.__slots__}


def test_growth_past_what_the_streams_account_for_still_makes_one_due() -> None:
    schedule = FullCollectionSchedule(baseline=60 * MIB, last=0.0, floor=0)
    schedule.ran(100 * MIB, 1.0, reclaimed=0, walked=500_000, streams=2_000)
    # no stream opened since: the growth is all unexplained (50 % now makes one due)
    assert schedule.due(150 * MIB, 2.0, streams=2_000) == "growth"
    # streams that closed account for nothing new either
    assert schedule.due(150 * MIB, 2.0, streams=1_000) == "growth"


def test_a_full_collection_that_finds_garbage_forgets_what_a_stream_was_taken_to_hold() -> None:
    schedule = FullCollectionSchedule(baseline=60 * MIB, last=0.0, floor=0)
    schedule.ran(100 * MIB, 1.0, reclaimed=0, walked=500_000, streams=2_000)
    schedule.ran(100 * MIB, 2.0, reclaimed=100_000, walked=500_000, streams=2_000)
    assert schedule.per_stream == 0.0
    assert schedule.due(125 * MIB, 3.0, streams=4_000) == "growth"


def test_a_full_collection_with_no_stream_opened_keeps_the_last_measure() -> None:
    schedule = FullCollectionSchedule(baseline=60 * MIB, last=0.0, floor=0)
    schedule.ran(100 * MIB, 1.0, reclaimed=0, walked=500_000, streams=2_048)
    schedule.ran(200 * MIB, 2.0, reclaimed=0, walked=500_000, streams=2_048)
    assert schedule.per_stream == 20 * 1024
    assert schedule.streams == 2_048


_POLICY_IN_A_PROCESS = textwrap.dedent(
    """
    import asyncio, gc, json, weakref
    from ssegate.host.collector import FullCollectionSchedule, LongLivedObjects
    from ssegate.telemetry.metrics import Metrics

    class Node:
        def __init__(self):
            self.me = self  # a cycle: only the collector frees it

    resident = [100 * 2**20]
    loop = asyncio.new_event_loop()
    metrics = Metrics()
    policy = LongLivedObjects(loop, metrics, resident=lambda: resident[0], check_seconds=0.01,
                              schedule=FullCollectionSchedule(resident[0], 0.0, max_interval=0))
    full_before = gc.get_stats()[2]["collections"]

    kept = [[i] for i in range(200_000)]  # long-lived: survives young collections
    for _ in range(3):
        gc.collect(1)
    frozen_after_kept = gc.get_freeze_count()

    for _ in range(50):  # churn that CPython's rule would answer with full collections
        batch = [[i] for i in range(100_000)]
        gc.collect(1)
        del batch
    automatic_full = gc.get_stats()[2]["collections"] - full_before

    cycles = [Node() for _ in range(1_000)]
    for _ in range(3):
        gc.collect(1)  # the cycles are frozen now
    probe = weakref.ref(cycles[0])
    del cycles
    alive_while_flat = probe() is not None
    loop.run_until_complete(asyncio.sleep(0.05))  # checks run: memory is flat
    alive_after_flat_checks = probe() is not None

    resident[0] += 64 * 2**20  # the Kafka cache filled: bounded, no garbage
    metrics.gauge("ssegate.kafka.cache.bytes", "cache", 64 * 2**20, topic="t")
    loop.run_until_complete(asyncio.sleep(0.05))
    alive_after_cache_growth = probe() is not None

    resident[0] += 64 * 2**20  # memory grew by more than a quarter, the cache aside
    loop.run_until_complete(asyncio.sleep(0.05))
    alive_after_growth = probe() is not None

    pauses = {dict(labels)["generation"]: hist.count
              for (name, labels), hist in metrics.histograms.items() if name == "ssegate.gc.pause"}
    policy.close()
    print(json.dumps({
        "frozen_after_kept": frozen_after_kept,
        "automatic_full": automatic_full,
        "alive_while_flat": alive_while_flat,
        "alive_after_flat_checks": alive_after_flat_checks,
        "alive_after_cache_growth": alive_after_cache_growth,
        "alive_after_growth": alive_after_growth,
        "full_collections": policy.full_collections,
        "full_counter": metrics.total("ssegate.gc.full_collections"),
        "pauses": pauses,
        "frozen_after_close": gc.get_freeze_count(),
        "threshold_after_close": list(gc.get_threshold()),
    }))
    """
)


def test_survivors_are_frozen_and_their_garbage_cycles_wait_for_growth_past_the_cache() -> None:
    result = _run(_POLICY_IN_A_PROCESS)
    assert result["frozen_after_kept"] >= 200_000
    assert result["automatic_full"] == 0
    assert result["alive_while_flat"] and result["alive_after_flat_checks"]
    assert result["alive_after_cache_growth"]
    assert not result["alive_after_growth"]
    assert result["full_collections"] == 1
    assert result["full_counter"] == 1
    assert result["pauses"].get("1", 0) >= 50 and result["pauses"].get("2", 0) == 1
    assert result["frozen_after_close"] == 0
    assert result["threshold_after_close"] == [700, 10, 10]


def test_the_policy_reads_the_open_streams_from_the_gauge_the_http_servers_keep() -> None:
    script = textwrap.dedent(
        """
        import asyncio, json
        from ssegate.host.collector import FullCollectionSchedule, LongLivedObjects
        from ssegate.telemetry.metrics import Metrics

        resident = [100 * 2**20]
        loop = asyncio.new_event_loop()
        metrics = Metrics()
        schedule = FullCollectionSchedule(resident[0], 0.0, floor=0, max_interval=0,
                                          stream_margin=1.0)
        policy = LongLivedObjects(loop, metrics, resident=lambda: resident[0],
                                  check_seconds=0.01, schedule=schedule)
        def grow(streams, mib):
            metrics.gauge("http.active.requests", "http0", streams)
            resident[0] += mib * 2**20
            loop.run_until_complete(asyncio.sleep(0.05))
            return policy.full_collections
        counts = [grow(1_000, 40)]  # +40 %: due, and nothing found: 40 KiB per stream
        counts.append(grow(4_000, 160))  # all of it the new streams'
        counts.append(grow(0, 100))  # nothing opened: growth like any other, due
        counts.append(grow(-5_000, 0))  # every stream closed: memory stays, nothing due
        counts.append(grow(1_000, 500))  # new ones in their place, and more than doubled memory
        policy.close()
        print(json.dumps([counts, schedule.streams, round(schedule.per_stream)]))
        """
    )
    counts, streams, per_stream = _run(script)
    assert counts == [1, 1, 2, 2, 3]
    assert streams == 1_000
    # none of them found garbage, and no stream was opened over 5,000: the last measure
    assert per_stream == 260 * MIB // 4_000


def test_ssegate_gc_python_keeps_cpythons_own_schedule() -> None:
    script = textwrap.dedent(
        """
        import asyncio, gc, json
        from ssegate.host.collector import LongLivedObjects
        from ssegate.telemetry.metrics import Metrics
        policy = LongLivedObjects.install(asyncio.new_event_loop(), Metrics())
        print(json.dumps([policy is None, list(gc.get_threshold()), gc.get_freeze_count()]))
        """
    )
    assert _run(script, SSEGATE_GC="python") == [True, [700, 10, 10], 0]


def _run(script: str, *arguments: str, **environment: str) -> Any:
    """What ``script`` printed as JSON, run by a Python process of its own."""
    found = subprocess.run(
        [sys.executable, "-c", script, *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, **environment},
    )
    return json.loads(found.stdout)


def test_a_full_collection_that_finds_no_garbage_doubles_the_growth_before_the_next() -> None:
    schedule = FullCollectionSchedule(baseline=100 * MIB, last=0.0, floor=0)
    schedule.ran(100 * MIB, 1.0, reclaimed=0, walked=1_000_000)
    assert schedule.due(140 * MIB, 2.0) is None  # +40 % < 50 %
    assert schedule.due(150 * MIB, 2.0) == "growth"
    for _ in range(5):
        schedule.ran(100 * MIB, 3.0, reclaimed=9_999, walked=1_000_000)
    assert schedule.growth == schedule.max_growth == 2.0
    assert schedule.due(299 * MIB, 4.0) is None


def test_a_full_collection_that_finds_garbage_sets_the_growth_back_to_a_quarter() -> None:
    schedule = FullCollectionSchedule(baseline=100 * MIB, last=0.0, floor=0, growth=2.0)
    schedule.ran(100 * MIB, 1.0, reclaimed=50_000, walked=1_000_000)
    assert schedule.growth == 0.25
    assert schedule.due(125 * MIB, 2.0) == "growth"


_BOUNDED_RING = textwrap.dedent(
    """
    import asyncio, collections, gc, json, sys
    from ssegate.host.collector import LongLivedObjects
    from ssegate.telemetry.metrics import Metrics

    class Record:  # a cached record: tracked, as a Kafka message is
        __slots__ = ("key", "headers")
        def __init__(self, key):
            self.key = key
            self.headers = [key]

    loop = asyncio.new_event_loop()
    policy = None
    if sys.argv[1] == "policy":
        policy = LongLivedObjects(loop, Metrics(), young_seconds=0.01)
    ring = collections.deque(Record(i) for i in range(100_000))  # a cache at its bound
    gc.collect()
    gc.freeze()
    young = []

    async def churn():
        for step in range(60):
            for i in range(5_000):  # each new record evicts an old one
                ring.append(Record(i))
                ring.popleft()
            await asyncio.sleep(0.002)
            young.append(len(gc.get_objects(0)) + len(gc.get_objects(1)))

    loop.run_until_complete(churn())
    if policy is not None:
        policy.close()
    print(json.dumps(max(young)))
    """
)


def test_a_cache_at_its_bound_leaves_no_young_generation_to_pile_up() -> None:
    # CPython alone: allocations less deallocations stay near 0, so no young collection runs
    # and every record made waits in the young generation, for a collection that walks them all
    assert _run(_BOUNDED_RING, "python") >= 200_000  # the whole ring, young again
    # the policy collects the young generations from the loop: what a few ms allocated
    assert _run(_BOUNDED_RING, "policy") < 60_000


def test_free_pages_are_returned_once_connections_fell_by_enough_from_the_most_open() -> None:
    pages = FreePagesReturn(after_closed=500)
    assert not pages.due(1_000)
    assert not pages.due(600)  # 400 closed: not yet
    assert pages.due(500)  # 500 fewer than the most
    assert not pages.due(100)  # counted again from 500
    assert not pages.due(2_000)
    assert pages.due(1_400)


def test_connections_opening_or_closing_a_few_at_a_time_return_nothing() -> None:
    pages = FreePagesReturn(after_closed=500)
    assert not any(pages.due(n) for n in (10, 400, 100, 450, 0, 300, 200))


def test_the_policy_asks_the_allocator_for_its_free_pages_after_a_mass_disconnect() -> None:
    script = textwrap.dedent(
        """
        import asyncio, json
        from ssegate.host.collector import LongLivedObjects
        from ssegate.telemetry.metrics import Metrics

        loop = asyncio.new_event_loop()
        metrics = Metrics()
        policy = LongLivedObjects(loop, metrics, check_seconds=0.01)
        def connections(delta):
            metrics.gauge("http.active.requests", "http0", delta)
            loop.run_until_complete(asyncio.sleep(0.05))
            return policy.pages_returned
        returned = [connections(1_000), connections(-100), connections(-900), connections(0)]
        policy.close()
        print(json.dumps(returned))
        """
    )
    assert _run(script) == [0, 0, 1, 1]


def _page_return_in(environ: dict[str, str]) -> str:
    """The name and result of the collector's page return, in a fresh interpreter."""
    script = "from ssegate.host import collector as c; t = c._RETURN_PAGES; print(t.__name__, t(0))"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=environ, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_pages_go_back_through_jemalloc_purge_when_the_gateway_runs_on_it() -> None:
    environ = dict(os.environ, LD_PRELOAD="libjemalloc.so.2", PYTHONMALLOC="malloc")
    assert _page_return_in(environ) == "purge 0"


def test_pages_go_back_through_malloc_trim_on_glibc() -> None:
    environ = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "PYTHONMALLOC")}
    name, _ = _page_return_in(environ).split()
    assert name == "malloc_trim"

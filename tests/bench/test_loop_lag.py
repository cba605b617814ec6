"""The loop-lag sampler in real processes: started by its ``sitecustomize`` on uvloop, in a
process and in a child it forks, it records a callback that blocks the loop, with its stack."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ssegate_lab.loop_lag import profiled_env
from ssegate_lab.loop_lag_report import read_directory, top_stacks

SCRIPT = """
import asyncio, os, time
import uvloop
from ssegate_lab import loop_lag


def block_the_loop():
    time.sleep(0.1)


async def main():
    deadline = time.monotonic() + 20
    while not loop_lag.current().armed.is_set() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    asyncio.get_running_loop().call_soon(block_the_loop)
    await asyncio.sleep(0.3)


asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
child = os.fork()
if child == 0:  # a worker, forked before it makes its loop, as `ssegate start --workers` does
    try:
        asyncio.run(main())
    finally:
        os._exit(0)
os.waitpid(child, 0)
asyncio.run(main())
print(child)
"""


def test_a_blocked_loop_is_recorded_with_the_blocking_function_in_parent_and_forked_child(
    tmp_path: Path,
) -> None:
    script = tmp_path / "blocks.py"
    script.write_text(SCRIPT)
    lag = tmp_path / "lag"
    env = {**os.environ, **profiled_env({}, lag)}
    done = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    child = int(done.stdout.split()[-1])

    recorded = read_directory(lag)
    pids = {p["pid"] for p in recorded.processes}
    assert child in pids
    assert len(pids) == 2
    for pid in pids:
        blocked = [
            m
            for m in recorded.moments
            if m["pid"] == pid and any("block_the_loop" in s for s in m["stacks"])
        ]
        assert blocked, recorded.moments
        moment = max(blocked, key=lambda m: m["duration_ms"])
        assert moment["duration_ms"] >= 50
        (stack, _), *_ = top_stacks(moment["stacks"], 1)
        assert stack.rsplit(";", 1)[-1].split(":")[1] == "block_the_loop"  # the leaf, last


def test_without_the_directory_set_the_sitecustomize_samples_nothing(tmp_path: Path) -> None:
    env = {**os.environ, **profiled_env({}, tmp_path / "lag")}
    del env["SSEGATE_LAB_LOOP_LAG_DIR"]
    done = subprocess.run(
        [sys.executable, "-c", "import asyncio; asyncio.run(asyncio.sleep(0.05))"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert list((tmp_path / "lag").iterdir()) == []

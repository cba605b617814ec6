"""A load client process (``lab/src/ssegate_lab/bench/client_process.py``) whose bench is gone."""

from __future__ import annotations

import time

from ssegate_lab.bench.stalled_clients import StallLoad


def test_a_client_process_exits_when_the_bench_that_drives_it_is_gone() -> None:
    with StallLoad(1, b"", files=256, timeout=30) as load:
        assert load.report()["received"] == 0  # it answers while the bench is there
        process, pipe = load._process, load._pipe
        assert process is not None and pipe is not None
        pipe.close()  # what a killed bench leaves it: the other end of its pipe closed
        load._pipe = None
        deadline = time.monotonic() + 10
        while process.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not process.is_alive(), "the client process went on without its bench"
        assert process.exitcode == 0

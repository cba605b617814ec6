"""The reference fan-out server (``sse_floor.c``) with the bench's real upstream and load clients.

``./run``'s setup step ``sse-floor`` compiles it; the test takes it with ``prepared`` and fails
naming that step when it is missing. Five streams over plain HTTP/1.1 and five over TLS read a
fixed-rate publication of two seconds; every stream must read every event once and in order.
The servers' CPU is read to the nanosecond from the scheduler's counters.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
from pathlib import Path

import pytest

from ssegate_lab.bench.floor import pem_from_keystore
from ssegate_lab.bench.floor_server import FloorServer, scheduled_seconds
from ssegate_lab.bench.foundation import PASSWORD
from ssegate_lab.bench.load import LoadClients, LoadSpec
from ssegate_lab.bench.proxy import upstream_publisher
from ssegate_lab.bench.publisher import UpstreamProcess
from ssegate_lab.testing.certs import make_keystore
from ssegate_lab.testing.tools import prepared

RATE = 200.0
SECONDS = 2.0
STREAMS_EACH = 5
DRAIN_SECONDS = 3.0
"""After the last event is published, the streams read on this long before they are stopped:
hundreds of times what 400 events on ten loopback streams take, even on a loaded machine."""


def test_scheduled_seconds_count_the_cpu_a_process_spent() -> None:
    before = scheduled_seconds(os.getpid())
    spent = time.process_time()
    while time.process_time() - spent < 0.05:
        pass
    after = scheduled_seconds(os.getpid())
    assert before is not None and after is not None
    assert after - before >= 0.04


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_every_stream_plain_and_tls_reads_every_event_once_and_in_order() -> None:
    binary = prepared("sse-floor")
    with tempfile.TemporaryDirectory() as tmp, UpstreamProcess() as upstream:
        keystore = Path(tmp) / "localhost.p12"
        make_keystore(keystore, alias="localhost", password=PASSWORD)
        pem = pem_from_keystore(keystore, PASSWORD, Path(tmp))
        with FloorServer(binary, upstream.http_port, pem) as floor:
            plain = LoadSpec(port=floor.port, clients=STREAMS_EACH, max_seconds=60)
            tls = dataclasses.replace(plain, port=floor.tls_port, tls=True)
            with LoadClients(plain, 1) as plain_load, LoadClients(tls, 1) as tls_load:
                opened = [plain_load.wait_ready(), tls_load.wait_ready()]
                published = upstream_publisher(upstream.publish_port, RATE, SECONDS, 0)()
                time.sleep(DRAIN_SECONDS)
                results = [plain_load.stop(), tls_load.stop()]
    assert published.events == round(RATE * SECONDS)
    owed = published.events * STREAMS_EACH
    for ready, result in zip(opened, results, strict=True):
        assert (ready.opened, ready.failed) == (STREAMS_EACH, 0), ready.errors
        assert result.received == owed, result.errors
        assert (result.duplicates, result.gaps, result.late, result.closed_early) == (0, 0, 0, 0)
    assert floor.stopped_counts()["dropped"] == 0

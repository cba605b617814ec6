"""The time index's edge without a broker: a cluster that does not answer is a clear failure
within the lookup's timeout, never a wait without end (its answers against a real broker are
asserted in tests/test_sse_kafka_since.py)."""

from __future__ import annotations

import asyncio
import time

import pytest

from ssegate.bindings.kafka.client import KafkaClient
from ssegate.bindings.kafka.time_index import TimeIndex
from ssegate.engine.runtime import free_port
from ssegate.kafka.times import TimeLookupFailed


def test_a_cluster_that_does_not_answer_fails_the_lookup_within_its_timeout() -> None:
    index = TimeIndex(KafkaClient("south", (f"127.0.0.1:{free_port()}",)), timeout=1.0)

    async def lookup() -> float:
        started = time.monotonic()
        with pytest.raises(TimeLookupFailed) as failed:
            await index.offsets_for_time("events", 0)
        assert "the broker did not answer the time lookup" in failed.value.reason
        return time.monotonic() - started

    try:
        assert asyncio.run(lookup()) < 10.0
    finally:
        index.close()

"""A Kafka broker that stops and comes back while SSE clients read through a gateway process.

The gateway is a real ``ssegate start`` process on ``examples/sse.kafka/zilla.yaml`` with the
sse server's ``keepalive`` lowered to 1 s; the broker is a real one of this test's own, stopped
and restarted on the same data directory and port. Clients are httpx over HTTP/1.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from tests.test_sse_kafka import EXAMPLE, SSE, Kafka, start_gateway

from ssegate.bindings.sse_kafka.event_id import decode_progress, progress_of_last_event_id
from ssegate.sse_codec.parser import SseEvent, SseParser
from ssegate_lab.bench.gateway import GatewayProcess
from ssegate_lab.broker import start_broker, stop_broker
from ssegate_lab.testing.kafka import TEST_JAVA_OPTIONS, free_port

pytestmark = pytest.mark.integration

SSE_SERVER = "  north_sse_server:\n    type: sse\n    kind: server\n"


def write_config(root: Path) -> Path:
    """The example config with a 1 s keep-alive, in ``root`` (the example reads no env for it)."""
    text = (EXAMPLE / "zilla.yaml").read_text()
    assert SSE_SERVER in text
    config = root / "zilla.yaml"
    config.write_text(text.replace(SSE_SERVER, SSE_SERVER + "    options:\n      keepalive: 1\n"))
    return config


class Reader:
    """Reads one open SSE response in the background: its events, keep-alives, and its end."""

    def __init__(self, response: httpx.Response, last_id: str = "") -> None:
        self.response = response
        self.parser = SseParser(last_event_id=last_id)
        self.events: list[SseEvent] = []
        self.keepalives = 0
        self.ended = False
        self._partial = b""
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for chunk in self.response.aiter_raw():
                lines = (self._partial + chunk).split(b"\n")
                self._partial = lines.pop()
                self.keepalives += sum(1 for line in lines if line.startswith(b":"))
                self.events += [e for e in self.parser.feed(chunk) if isinstance(e, SseEvent)]
        finally:
            self.ended = not self.task.cancelled() and not self.task.cancelling()

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


async def until(condition: Callable[[], bool], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def check_in_partition_order(events: list[SseEvent], expected: dict[int, list[int]]) -> None:
    """Every event is ``p{P}-{N}`` at offset N of partition P: per partition, exactly
    ``expected[P]`` in order, and each event's id says offset N + 1 is next on P."""
    seen: dict[int, list[int]] = {}
    for event in events:
        partition, number = (int(part) for part in event.data[1:].split("-"))
        seen.setdefault(partition, []).append(number)
        assert progress_of_last_event_id(event.id)[partition] == number + 1, event
    assert seen == expected


def test_a_broker_restart_mid_stream_loses_and_repeats_nothing(tmp_path: Path) -> None:
    port, controller = free_port(), free_port()
    data_dir = tmp_path / "kafka"
    info = start_broker(port, data_dir, controller_port=controller,
                        java_options=TEST_JAVA_OPTIONS)  # fmt: skip
    try:
        kafka = Kafka(info.bootstrap)
        topic = kafka.topic(partitions=3)
        example, gateway = start_gateway(tmp_path, info.bootstrap)
        process = GatewayProcess(write_config(tmp_path), env=example.env, expect_listeners=2)

        def produce(numbers: range) -> None:
            for n in numbers:
                for p in range(3):
                    kafka.send(topic, p, f"p{p}-{n}")
            kafka.flush()

        async def scenario() -> tuple[Reader, Reader, str]:
            async with (
                gateway.client(timeout=60) as client,
                client.stream("GET", gateway.url(f"/{topic}"), headers=SSE) as first_response,
            ):
                assert first_response.status_code == 200
                first = Reader(first_response)
                try:
                    await asyncio.to_thread(produce, range(4))
                    await until(lambda: len(first.events) == 12, "12 events before the stop", 15)
                    last_id = first.events[-1].id

                    await asyncio.to_thread(stop_broker, data_dir)
                    alive_at = first.keepalives
                    await until(lambda: first.keepalives >= alive_at + 2, "keep-alives", 5)
                    resumed = client.stream(
                        "GET", gateway.url(f"/{topic}"), headers=SSE | {"last-event-id": last_id}
                    )
                    async with resumed as second_response:
                        assert second_response.status_code == 200
                        second = Reader(second_response, last_id)
                        try:
                            await until(lambda: second.keepalives >= 1, "a keep-alive", 5)
                            assert not first.ended and not second.ended
                            assert (len(first.events), len(second.events)) == (12, 0)

                            await asyncio.to_thread(
                                start_broker, port, data_dir, controller_port=controller,
                                java_options=TEST_JAVA_OPTIONS,
                            )  # fmt: skip
                            await asyncio.to_thread(produce, range(4, 8))
                            await until(lambda: len(first.events) >= 24, "24 events", 20)
                            await until(lambda: len(second.events) >= 12, "12 resumed", 5)
                            await asyncio.sleep(1.5)  # room for a repeat to show up
                            assert not first.ended and not second.ended
                        finally:
                            await second.close()
                finally:
                    await first.close()
            return first, second, last_id

        with process:
            try:
                first, second, last_id = asyncio.run(scenario())
            except BaseException:
                print("\n".join(process.output))
                raise
    finally:
        stop_broker(data_dir)

    log = "\n".join(process.output)
    assert '"event":"kafka.broker_down"' in log and '"event":"kafka.broker_up"' in log
    check_in_partition_order(first.events, {p: list(range(8)) for p in range(3)})
    check_in_partition_order(second.events, {p: list(range(4, 8)) for p in range(3)})
    assert decode_progress(last_id) == {0: 4, 1: 4, 2: 4}
    assert decode_progress(first.events[-1].id) == {0: 8, 1: 8, 2: 8}
    assert decode_progress(second.events[-1].id) == {0: 8, 1: 8, 2: 8}

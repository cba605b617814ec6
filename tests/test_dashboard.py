"""The demo's dashboard end to end: Spark pipeline → Kafka → ssegate → Chromium's EventSource.

A real broker, the real pipeline (``tests/dashboard/sensors.yaml``: the example's pipeline on a
shorter clock) as a child process, the gateway on ``examples/dashboard/zilla.yaml`` and the
dashboard page in Chromium, with a token the page mints for tenant ``globex`` from the signing
key in its fragment, as with ``./run demo``. The page must draw aggregates of globex's devices
only (the events stream is filtered by the token's tenant), list alerts, fill the devices table
from the compacted topic, and drop the row of the device that goes silent when its tombstone
arrives as a ``delete`` event.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, sync_playwright

from ssegate.bench.gateway import GatewayProcess
from ssegate.demo import (
    DASHBOARD,
    DASHBOARD_TOPICS,
    dashboard_env,
    page_fragment,
    start_pipeline,
    stop_child,
    wait_for_topics,
)
from ssegate.engine.runtime import free_port
from ssegate.kafka.broker import BrokerInfo
from ssegate.kafka.testing import kafka_broker as kafka_broker
from ssegate.testing.certs import make_keystore
from ssegate.tools.token import generate_key

from .test_browser import CHROMIUM, CHROMIUM_ARGS

PIPELINE = Path(__file__).resolve().parent / "dashboard" / "sensors.yaml"
PASSWORD = "dashboard-secret"
TENANT = "globex"
GLOBEX_DEVICES = {"device-001", "device-004"}  # device n belongs to tenant n mod 3
SILENT_DEVICE = "device-005"
# One shuffle partition per stateful query: half the tasks per micro-batch on a busy machine.
FEWER_TASKS = {"spark.sql.shuffle.partitions": "1"}


@pytest.fixture
def page() -> Iterator[Page]:
    if not os.path.exists(CHROMIUM):
        pytest.fail("Chromium is not installed: ./run test installs the Debian package")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        context = browser.new_context(ignore_https_errors=True)
        yield context.new_page()
        browser.close()


def device_rows(page: Page) -> dict[str, str]:
    """Device → tenant, as the devices table shows them."""
    rows: dict[str, str] = page.evaluate(
        """Object.fromEntries([...document.querySelectorAll('#devices tr')]
             .map((row) => [row.dataset.device, row.children[1].textContent]))"""
    )
    return rows


@pytest.mark.timeout(240)  # about 90 s; Spark's start-up takes longer when the cores are busy
def test_the_dashboard_draws_pipeline_output_for_its_tenant_and_drops_a_silent_device(
    kafka_broker: BrokerInfo, tmp_path: Path, page: Page
) -> None:
    bundle = make_keystore(tmp_path / "localhost.p12", alias="localhost", password=PASSWORD)
    signing_key = generate_key("ec")
    https_port = free_port()
    env = dashboard_env(bundle.keystore, PASSWORD, https_port, kafka_broker.bootstrap, signing_key)
    with open(tmp_path / "pipeline.log", "wb") as log:
        pipeline = start_pipeline(
            PIPELINE, kafka_broker.bootstrap, tmp_path / "checkpoints", log, conf=FEWER_TASKS
        )
    try:
        wait_for_topics(kafka_broker.bootstrap, DASHBOARD_TOPICS, pipeline, timeout=90)
        with GatewayProcess(DASHBOARD / "zilla.yaml", env=env):
            fragment = page_fragment(signing_key) + f"&tenant={TENANT}"
            page.goto(f"https://localhost:{https_port}/index.html{fragment}")
            page.wait_for_function(
                "document.querySelectorAll('[data-stream] b.open').length === 3", timeout=20_000
            )
            page.wait_for_function(
                f"dashboard.removed.includes('{SILENT_DEVICE}')"
                " && dashboard.windows.size >= 2 && dashboard.alerts > 0",
                timeout=75_000,
            )
            charted = set(page.evaluate("[...dashboard.windows.keys()]"))
            legend = page.locator("#legend span").evaluate_all("s => s.map(e => e.dataset.device)")
            rows = device_rows(page)
            removed_note = page.inner_text("#removed")
            alerts = page.locator("#alerts li:not(.empty)").count()
    finally:
        stop_child(pipeline, timeout=20)
    assert charted == GLOBEX_DEVICES
    assert set(legend) == GLOBEX_DEVICES
    assert all(rows[device] == TENANT for device in charted)
    assert SILENT_DEVICE not in rows
    assert {f"device-00{n}" for n in range(5)} <= set(rows)
    assert SILENT_DEVICE in removed_note
    assert alerts >= 1

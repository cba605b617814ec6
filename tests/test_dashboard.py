"""The demo's dashboard end to end: Spark pipeline → Kafka → ssegate → Chromium's EventSource.

A real broker, the real pipeline (``tests/dashboard/sensors.yaml``: the example's pipeline on a
shorter clock) as a child process, the gateway on ``examples/dashboard/zilla.yaml`` and the
dashboard page in Chromium at 1280 by 800, with a token the page mints for tenant ``globex`` from
the signing key in its fragment, as with ``./run demo``. The page must:

- say what it waits for before the first full window, then draw globex's devices only (the
  events stream is filtered by the token's tenant), never a partial window;
- list globex's alerts only (the alerts stream is filtered too), as episodes of its server room,
  and count the other tenants' alerts from the per-tenant counts;
- mark the device that goes silent as deleted when its tombstone arrives as a ``delete`` event,
  in a row that is on screen without scrolling;
- show each stream's resume point as partition→offset, decoded from its last event id;
- count the challenges it answered (a 15 s token is challenged every 5 s) as they happen;
- keep its header on one line, and serve its favicon.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, ViewportSize, sync_playwright

from ssegate.bindings.sse_kafka.event_id import progress_of_last_event_id
from ssegate.engine.runtime import free_port
from ssegate.tools.token import generate_key
from ssegate_lab.bench.gateway import GatewayProcess
from ssegate_lab.broker import BrokerInfo
from ssegate_lab.demo import (
    DASHBOARD,
    DASHBOARD_TOPICS,
    dashboard_env,
    page_fragment,
    start_pipeline,
    stop_child,
    wait_for_topics,
)
from ssegate_lab.testing.certs import make_keystore
from ssegate_lab.testing.kafka import kafka_broker as kafka_broker

from .test_browser import CHROMIUM, CHROMIUM_ARGS

PIPELINE = Path(__file__).resolve().parent / "dashboard" / "sensors.yaml"
PASSWORD = "dashboard-secret"
TENANT = "globex"
GLOBEX_DEVICES = {"device-001", "device-004"}  # device n belongs to tenant n mod 3
GLOBEX_SERVER_ROOM = "device-001"  # the first device of each tenant is its server room
SILENT_DEVICE = "device-005"
# The test pipeline's clock, and a token that lives 15 s: a challenge every 5 s.
PAGE_OPTIONS = f"&tenant={TENANT}&ttl=15&window=2&watermark=1&day=48"
VIEWPORT: ViewportSize = {"width": 1280, "height": 800}

STATE = """() => ({
  windows: Object.fromEntries([...dashboard.windows].map(([d, points]) => [d, points.length])),
  legend: [...document.querySelectorAll('#legend span')].map((s) => s.dataset.device),
  waited: dashboard.waited,
  waitingHidden: document.getElementById('waiting').hidden,
  alerts: dashboard.alerts,
  others: dashboard.others,
  episodes: dashboard.episodes.map((e) => e.device),
  episodeItems: [...document.querySelectorAll('#alerts li')].map((li) => li.dataset.device),
  summary: document.getElementById('alert-summary').textContent,
  rows: Object.fromEntries([...document.querySelectorAll('#devices tr')].map((row) =>
    [row.dataset.device, {tenant: row.children[1].textContent, className: row.className,
                          status: row.lastChild.textContent,
                          bottom: row.getBoundingClientRect().bottom}])),
  removedNote: document.getElementById('removed').textContent,
  streams: [...document.querySelectorAll('.stream')].map((s) =>
    ({name: s.dataset.stream, shown: s.querySelector('code').textContent, title: s.title})),
  extensions: dashboard.extensions,
  auth: document.getElementById('auth').textContent,
  headerHeight: document.querySelector('header').getBoundingClientRect().height,
  icon: document.querySelector('link[rel=icon]').getAttribute('href'),
})"""


@pytest.fixture
def page() -> Iterator[Page]:
    if not os.path.exists(CHROMIUM):
        pytest.fail("Chromium is not installed: ./run test installs the Debian package")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        context = browser.new_context(ignore_https_errors=True, viewport=VIEWPORT)
        yield context.new_page()
        browser.close()


@pytest.mark.timeout(300)  # about 100 s; Spark's start-up takes longer when the cores are busy
def test_the_dashboard_tells_the_pipeline_story_for_its_tenant(
    kafka_broker: BrokerInfo, tmp_path: Path, page: Page
) -> None:
    bundle = make_keystore(tmp_path / "localhost.p12", alias="localhost", password=PASSWORD)
    signing_key = generate_key("ec")
    https_port = free_port()
    env = dashboard_env(bundle.keystore, PASSWORD, https_port, kafka_broker.bootstrap, signing_key)
    with open(tmp_path / "pipeline.log", "wb") as log:
        pipeline = start_pipeline(PIPELINE, kafka_broker.bootstrap, tmp_path / "checkpoints", log)
    try:
        wait_for_topics(kafka_broker.bootstrap, DASHBOARD_TOPICS, pipeline, timeout=90)
        with GatewayProcess(DASHBOARD / "zilla.yaml", env=env):
            base = f"https://localhost:{https_port}"
            page.goto(f"{base}/index.html{page_fragment(signing_key)}{PAGE_OPTIONS}")
            page.wait_for_function(
                "document.querySelectorAll('.stream .state.open').length === 4", timeout=20_000
            )
            page.wait_for_function(
                f"dashboard.removed.includes('{SILENT_DEVICE}') && dashboard.windows.size >= 2"
                " && dashboard.alerts > 0 && dashboard.others > 0 && dashboard.extensions >= 1",
                timeout=120_000,
            )
            page.wait_for_timeout(1_000)  # the alerts panel is drawn on the next frame
            state: dict[str, Any] = page.evaluate(STATE)
            decoded = page.evaluate("dashboard.progressOf('AQQABAIC')")
            favicon = page.request.get(f"{base}/favicon.svg")
            partial = page.evaluate(
                """() => {
                  addWindow({device: 'device-999', window_start: '2026-01-01T00:00:00Z',
                             window_end: '2026-01-01T00:00:02Z', avg_temperature: 21,
                             max_temperature: 21, first_reading: '2026-01-01T00:00:01.500Z',
                             last_reading: '2026-01-01T00:00:01.900Z'});
                  return [dashboard.windows.has('device-999'), dashboard.partial];
                }"""
            )
    finally:
        stop_child(pipeline, timeout=60)

    # Waiting, then globex's full windows only.
    assert "Waiting for the first full 2-s window" in state["waited"]
    assert state["waitingHidden"]
    assert set(state["windows"]) == GLOBEX_DEVICES
    assert set(state["legend"]) == GLOBEX_DEVICES
    assert partial[0] is False and partial[1] >= 1
    # globex's alerts only, from its server room, and the others' count beside them.
    assert set(state["episodes"]) == {GLOBEX_SERVER_ROOM}
    assert set(state["episodeItems"]) == {GLOBEX_SERVER_ROOM}
    assert f"other tenants: {state['others']} alert" in state["summary"]
    assert f"{state['alerts']} reading" in state["summary"]
    # The silent device: deleted, highlighted, on screen.
    rows = state["rows"]
    assert {f"device-00{n}" for n in range(6)} <= set(rows)
    assert all(rows[device]["tenant"] == TENANT for device in state["windows"])
    deleted = rows[SILENT_DEVICE]
    assert "deleted" in deleted["className"].split()
    assert deleted["status"].startswith("deleted at ")
    assert deleted["bottom"] <= VIEWPORT["height"]
    assert SILENT_DEVICE in state["removedNote"]
    assert [row for device, row in rows.items() if "deleted" in row["className"]] == [deleted]
    # Resume points: what the page shows is the last event id, decoded.
    assert decoded == [[0, 2], [1, 1]]
    for stream in state["streams"]:
        last_id = re.search(r"last event id (\S+)\)", stream["title"])
        assert last_id, stream
        progress = progress_of_last_event_id(last_id.group(1))
        shown = " ".join(f"p{p}→{offset}" for p, offset in sorted(progress.items()))
        assert stream["shown"] == shown, stream
    # The challenge counter says how many challenges were answered, as they are.
    n = state["extensions"]
    assert f"{n} challenge{'' if n == 1 else 's'} answered" in state["auth"]
    # One line of header; a favicon.
    assert state["headerHeight"] < 60
    assert state["icon"] == "favicon.svg"
    assert favicon.status == 200
    assert favicon.headers["content-type"].startswith("image/svg+xml")

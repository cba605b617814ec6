"""A real browser: Chromium's EventSource on the example page, through ssegate over https/h2.

The page (served by the ``filesystem`` binding) opens ``/events``; lines published to the
upstream example server arrive as list items. Then the gateway process is restarted: the page's
EventSource reconnects with ``Last-Event-ID`` and resumes where it stopped.

``/events`` is guarded (seed 000's JWT guard, ``challenge: 10``): the page mints its tokens
from the signing key in its URL fragment, as with ``./run demo``. With 11-second tokens the
page answers challenges and keeps its one stream past the first expiry; told not to answer, it
is cut off at the expiry.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, sync_playwright

from ssegate.engine.runtime import free_port
from ssegate_lab.bench.gateway import GatewayProcess
from ssegate_lab.demo import page_fragment
from ssegate_lab.testing.certs import make_keystore

from .test_sse_proxy import EXAMPLE, PASSWORD, example_env, guard_key

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
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


def publish(port: int, *lines: str) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall("".join(f"{line}\n" for line in lines).encode())


def shown(page: Page) -> list[tuple[str, str]]:
    items = page.locator("#events li")
    return [
        (items.nth(i).get_attribute("data-id") or "", items.nth(i).inner_text())
        for i in range(items.count())
    ]


def wait_for_items(page: Page, count: int, timeout: float = 20.0) -> list[tuple[str, str]]:
    page.wait_for_function(
        f"document.querySelectorAll('#events li').length >= {count}", timeout=timeout * 1000
    )
    return shown(page)


def test_eventsource_receives_events_over_h2_and_resumes_after_a_gateway_restart(
    page: Page, tmp_path: Path
) -> None:
    bundle = make_keystore(tmp_path / "localhost.p12", alias="localhost", password=PASSWORD)
    https_port, upstream_port, publish_port = free_port(), free_port(), free_port()
    env = example_env(bundle.keystore, https_port, upstream_port)
    upstream = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ssegate.tools.sse_server",
            "--http-port",
            str(upstream_port),
            "--publish-port",
            str(publish_port),
        ],
    )
    try:
        _wait_for_port(publish_port)
        with GatewayProcess(EXAMPLE / "zilla.yaml", env=env):
            page.goto("about:blank")
            page.goto(f"https://localhost:{https_port}/index.html{page_fragment(guard_key('ec'))}")
            page.wait_for_function("document.getElementById('state').textContent === 'open'")
            protocol = page.evaluate(
                "performance.getEntriesByType('navigation')[0].nextHopProtocol"
            )
            assert protocol == "h2"
            publish(publish_port, "one", "two", "three")
            assert wait_for_items(page, 3) == [("1", "one"), ("2", "two"), ("3", "three")]

        # The gateway is down: the page notices, and events published now wait upstream.
        page.wait_for_function("document.getElementById('state').textContent !== 'open'")
        publish(publish_port, "four")
        with GatewayProcess(EXAMPLE / "zilla.yaml", env=env):
            page.wait_for_function(
                "document.getElementById('state').textContent === 'open'", timeout=20_000
            )
            publish(publish_port, "five")
            items = wait_for_items(page, 5)
        assert items == [("1", "one"), ("2", "two"), ("3", "three"), ("4", "four"), ("5", "five")]
    finally:
        upstream.terminate()
        upstream.wait(timeout=10)


@pytest.fixture
def example(tmp_path: Path) -> Iterator[tuple[int, int]]:
    """The example gateway and its upstream: yields (https port, publish port)."""
    bundle = make_keystore(tmp_path / "localhost.p12", alias="localhost", password=PASSWORD)
    https_port, upstream_port, publish_port = free_port(), free_port(), free_port()
    upstream = subprocess.Popen(
        [sys.executable, "-m", "ssegate.tools.sse_server", "--http-port", str(upstream_port),
         "--publish-port", str(publish_port)],
    )  # fmt: skip
    try:
        _wait_for_port(publish_port)
        env = example_env(bundle.keystore, https_port, upstream_port)
        with GatewayProcess(EXAMPLE / "zilla.yaml", env=env):
            yield https_port, publish_port
    finally:
        upstream.terminate()
        upstream.wait(timeout=10)


TOKEN_TTL = 11


def test_the_page_answers_challenges_and_keeps_its_stream_past_the_first_expiry(
    page: Page, example: tuple[int, int]
) -> None:
    https_port, publish_port = example
    page.goto("about:blank")
    fragment = page_fragment(guard_key("ec"), ttl=TOKEN_TTL)
    page.goto(f"https://localhost:{https_port}/index.html{fragment}")
    page.wait_for_function("document.getElementById('state').textContent === 'open'")
    started = time.monotonic()
    publish(publish_port, "before")
    wait_for_items(page, 1)
    page.wait_for_function("window.ssegate.extensions >= 1", timeout=15_000)
    time.sleep(max(0.0, TOKEN_TTL + 1.5 - (time.monotonic() - started)))
    publish(publish_port, "after the first expiry")
    assert [text for _, text in wait_for_items(page, 2)] == ["before", "after the first expiry"]
    counters = page.evaluate("window.ssegate")
    assert counters["opens"] == 1
    assert counters["refusals"] == 0


def test_a_page_that_does_not_answer_is_cut_off_at_expiry(
    page: Page, example: tuple[int, int]
) -> None:
    https_port, publish_port = example
    page.goto("about:blank")
    fragment = page_fragment(guard_key("ec"), ttl=TOKEN_TTL, answer=False)
    page.goto(f"https://localhost:{https_port}/index.html{fragment}")
    page.wait_for_function("document.getElementById('state').textContent === 'open'")
    started = time.monotonic()
    page.wait_for_function("window.ssegate.challenges >= 1", timeout=5_000)
    page.wait_for_function(
        "document.getElementById('state').textContent === 'closed'",
        timeout=(TOKEN_TTL + 5) * 1000,
    )
    assert time.monotonic() - started >= TOKEN_TTL - 2
    publish(publish_port, "too late")
    time.sleep(0.5)
    assert shown(page) == []
    assert page.evaluate("window.ssegate.opens") == 1


def _wait_for_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")

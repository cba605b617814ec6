"""Which HTTP/1.1 heads ask for an h2c upgrade this server takes (RFC 7540 §3.2)."""

from __future__ import annotations

import pytest

from ssegate.bindings.http.h2c import as_stream_one, h2c_settings
from ssegate.engine.exchange import Request

SETTINGS = b"AAMAAABkAAQAAP__"  # MAX_CONCURRENT_STREAMS 100, INITIAL_WINDOW_SIZE 65535


def test_an_h2c_upgrade_with_one_settings_header_is_taken() -> None:
    head = [(b"Upgrade", b"h2c"), (b"HTTP2-Settings", SETTINGS)]
    assert h2c_settings(head) == SETTINGS
    assert h2c_settings([(b"upgrade", b"websocket, H2C"), (b"http2-settings", b"")]) == b""
    unpadded = [(b"upgrade", b"h2c"), (b"http2-settings", b"AAMAAABk")]
    assert h2c_settings(unpadded) == b"AAMAAABk"


@pytest.mark.parametrize(
    "head",
    [
        [(b"upgrade", b"websocket"), (b"http2-settings", SETTINGS)],
        [(b"upgrade", b"h2c")],
        [(b"upgrade", b"h2c"), (b"http2-settings", SETTINGS), (b"http2-settings", SETTINGS)],
        [(b"upgrade", b"h2c"), (b"http2-settings", b"AAMAAABkAA")],  # not whole settings
        [(b"upgrade", b"h2c"), (b"http2-settings", b"%%%%")],
    ],
    ids=["websocket", "no-settings", "two-settings", "partial-setting", "not-base64"],
)
def test_other_heads_are_answered_as_http_1_1(head: list[tuple[bytes, bytes]]) -> None:
    assert h2c_settings(head) is None


def test_the_upgraded_request_drops_its_hop_by_hop_headers() -> None:
    request = Request(
        "GET",
        "http",
        "localhost",
        "/events",
        {
            "upgrade": "h2c",
            "connection": "Upgrade, HTTP2-Settings",
            "http2-settings": "x",
            "a": "1",
        },
    )
    upgraded = as_stream_one(request)
    assert (upgraded.version, upgraded.headers) == ("2", {"a": "1"})

"""Which HTTP/1.1 heads ask for an h2c upgrade this server takes (RFC 7540 §3.2)."""

from __future__ import annotations

import base64
import struct

import pytest

from ssegate.bindings.http.h2c import UpgradeRefused, as_stream_one, h2c_settings
from ssegate.contract.exchange import Request

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


@pytest.mark.parametrize(
    ("code", "value", "reason"),
    [
        (0x2, 2, "ENABLE_PUSH may not be 2"),
        (0x4, 2**31, "INITIAL_WINDOW_SIZE may not be 2147483648"),
        (0x5, 1, "MAX_FRAME_SIZE may not be 1"),
        (0x5, 2**24, "MAX_FRAME_SIZE may not be 16777216"),
        (0x8, 7, "ENABLE_CONNECT_PROTOCOL may not be 7"),
    ],
)
def test_settings_http2_forbids_refuse_the_upgrade_naming_the_setting(
    code: int, value: int, reason: str
) -> None:
    allowed = struct.pack("!HL", 0x3, 100)
    settings = base64.urlsafe_b64encode(allowed + struct.pack("!HL", code, value))
    with pytest.raises(UpgradeRefused, match=reason) as refused:
        h2c_settings([(b"upgrade", b"h2c"), (b"http2-settings", settings)])
    assert refused.value.status == 400


def test_settings_at_their_limits_and_unknown_settings_are_taken() -> None:
    edges = [(0x2, 1), (0x4, 2**31 - 1), (0x5, 2**14), (0x5, 2**24 - 1), (0xABC, 2**32 - 1)]
    settings = base64.urlsafe_b64encode(b"".join(struct.pack("!HL", *e) for e in edges))
    assert h2c_settings([(b"upgrade", b"h2c"), (b"http2-settings", settings)]) == settings


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

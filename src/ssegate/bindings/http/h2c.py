"""HTTP/1.1 ``Upgrade: h2c`` on a cleartext port (RFC 7540 §3.2), as Zilla answers it.

A request on a cleartext connection of a server that offers ``h2``, carrying ``Upgrade: h2c``
(among other tokens, perhaps) and exactly one valid ``HTTP2-Settings`` header, is answered
``101 Switching Protocols``; the connection then speaks HTTP/2, and the request is stream 1 of
it, answered there. The request must be the only one on the connection so far: one pipelined
behind others is answered as HTTP/1.1, and so is every request that does not qualify (no or
several ``HTTP2-Settings``, a value that is not base64url SETTINGS, a server without ``h2``, a
TLS connection, where ALPN chooses), as in Zilla's ``upgrade.h2c.*`` scripts.

Well-formed SETTINGS whose values HTTP/2 forbids (``ENABLE_PUSH`` 2, ``INITIAL_WINDOW_SIZE`` over
2^31-1, ``MAX_FRAME_SIZE`` outside 2^14..2^24-1, …) would be a connection error the moment the
connection speaks HTTP/2, after the 101 is written: such a request is refused with
:class:`UpgradeRefused` before anything is answered, the http server's 400 naming the setting.
The rule is the one the HTTP/2 connection applies to the settings it receives (h2's
``Settings.validate_received_setting``), so the two can never disagree.

:func:`h2c_settings` decides from the request head; :data:`SWITCHING` is the 101 written.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import re
import struct

import h2.exceptions
import h2.settings

from ssegate.contract.exchange import Request

SWITCHING = b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"

HOP_BY_HOP = frozenset({"connection", "upgrade", "http2-settings", "keep-alive"})
"""Headers of the HTTP/1.1 request that do not travel with it into HTTP/2."""

_SETTING_BYTES = 6
_SETTING = struct.Struct("!HL")
_BASE64URL = re.compile(rb"[A-Za-z0-9_-]*={0,2}")
_FROM_CLIENT = h2.settings.Settings(client=True)
"""Only its rules are used: which values a server may receive from a client."""


class UpgradeRefused(ValueError):
    """An h2c upgrade whose ``HTTP2-Settings`` HTTP/2 forbids; the message names the setting."""

    status = 400


def h2c_settings(raw_headers: list[tuple[bytes, bytes]]) -> bytes | None:
    """The padded base64url ``HTTP2-Settings`` value when the head asks for h2c, else ``None``.

    ``raw_headers`` are the request's header fields as received, repeats kept. Raises
    :class:`UpgradeRefused` for well-formed settings with a value HTTP/2 forbids.
    """
    upgrade = b""
    settings: list[bytes] = []
    for name, value in raw_headers:
        lower = name.lower()
        if lower == b"upgrade":
            upgrade += b"," + value
        elif lower == b"http2-settings":
            settings.append(value.strip())
    if b"h2c" not in {token.strip().lower() for token in upgrade.split(b",")}:
        return None
    if len(settings) != 1:
        return None
    if not _BASE64URL.fullmatch(settings[0]):
        return None
    padded = settings[0].rstrip(b"=") + b"=" * (-len(settings[0].rstrip(b"=")) % 4)
    try:
        decoded = base64.urlsafe_b64decode(padded)
    except (binascii.Error, ValueError):
        return None
    if len(decoded) % _SETTING_BYTES:
        return None
    check_settings(decoded)
    return padded


def check_settings(payload: bytes) -> None:
    """Raise :class:`UpgradeRefused` when a setting of the SETTINGS ``payload`` (whole 6-byte
    entries) has a value a server may not accept from a client."""
    for code, value in _SETTING.iter_unpack(payload):
        try:
            _FROM_CLIENT.validate_received_setting(code, value)
        except h2.exceptions.InvalidSettingsValueError:
            name = _setting_name(code)
            raise UpgradeRefused(f"HTTP2-Settings: {name} may not be {value}") from None


def _setting_name(code: int) -> str:
    try:
        return h2.settings.SettingCodes(code).name
    except ValueError:
        return f"setting {code:#x}"


def as_stream_one(request: Request) -> Request:
    """The upgraded request as HTTP/2 stream 1 (a copy): version ``2``, hop-by-hop headers
    dropped."""
    headers = {k: v for k, v in request.headers.items() if k not in HOP_BY_HOP}
    return dataclasses.replace(request, version="2", headers=headers)

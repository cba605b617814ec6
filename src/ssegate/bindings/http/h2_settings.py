"""The settings an HTTP/2 connection opens with, and the one of them ``h2`` is not left to enforce.

:func:`open_connection` queues the server's side of the connection preface on an ``h2``
connection: its SETTINGS (``SETTINGS_MAX_CONCURRENT_STREAMS``, ``SETTINGS_INITIAL_WINDOW_SIZE``
and ``SETTINGS_MAX_HEADER_LIST_SIZE`` from :class:`~ssegate.bindings.http.types.HttpLimits`),
or, after an HTTP/1.1 ``Upgrade: h2c``, those and the client's ``HTTP2-Settings`` as stream 1's
(:mod:`ssegate.bindings.http.h2c`); and a WINDOW_UPDATE that widens the connection's receive
window from the protocol's default to ``initial_window_size``, as SETTINGS can only do per stream.

:class:`LocalSettings` announces ``SETTINGS_MAX_CONCURRENT_STREAMS`` but keeps ``h2`` from
enforcing it, so that a stream over it is refused with ``RST_STREAM(REFUSED_STREAM)`` (RFC 9113
§5.1.2) rather than ending the connection. Nothing here does I/O: what is queued goes out with
the connection's next flush.
"""

from __future__ import annotations

import h2.connection
import h2.settings

from ssegate.bindings.http.types import HttpLimits

DEFAULT_WINDOW = 65535
"""The flow-control window every HTTP/2 connection starts with (RFC 9113 §6.9.2)."""


class LocalSettings(h2.settings.Settings):
    """The settings sent to the peer, with ``SETTINGS_MAX_CONCURRENT_STREAMS`` left to
    :class:`~ssegate.bindings.http.h2.H2Protocol` to enforce: ``h2`` answers a stream over it
    with a connection error (GOAWAY), where RFC 9113 §5.1.2 asks for a stream error."""

    @property
    def max_concurrent_streams(self) -> int:
        return 2**31

    @max_concurrent_streams.setter
    def max_concurrent_streams(self, value: int) -> None:
        self[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS] = value


def open_connection(
    conn: h2.connection.H2Connection, limits: HttpLimits, upgrade_settings: bytes | None
) -> None:
    """Queue the server's preface on ``conn``; ``upgrade_settings`` is the ``HTTP2-Settings``
    of an h2c upgrade (stream 1 is then the HTTP/1.1 request, already complete)."""
    codes = h2.settings.SettingCodes
    conn.local_settings = LocalSettings(
        client=False,
        initial_values={
            codes.MAX_CONCURRENT_STREAMS: limits.max_concurrent_streams,
            codes.INITIAL_WINDOW_SIZE: limits.initial_window_size,
            codes.MAX_HEADER_LIST_SIZE: limits.max_header_bytes,
        },
    )
    if upgrade_settings is None:
        conn.initiate_connection()
    else:
        conn.initiate_upgrade_connection(upgrade_settings)
    if limits.initial_window_size > DEFAULT_WINDOW:
        conn.increment_flow_control_window(limits.initial_window_size - DEFAULT_WINDOW)

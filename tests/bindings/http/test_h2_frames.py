"""DATA frames written past the h2 library are the bytes and windows h2 itself would produce."""

from __future__ import annotations

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import pytest

from ssegate.bindings.http.h2_frames import append_data_frame


def open_pair() -> tuple[h2.connection.H2Connection, h2.connection.H2Connection]:
    """A client and a server with stream 1 answered (HALF_CLOSED_REMOTE on the server)."""
    client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    server = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    client.initiate_connection()
    client.send_headers(
        1,
        [(":method", "GET"), (":path", "/"), (":scheme", "http"), (":authority", "x")],
        end_stream=True,
    )
    server.initiate_connection()
    server.receive_data(client.data_to_send())
    client.receive_data(server.data_to_send())
    server.receive_data(client.data_to_send())
    server.send_headers(1, [(":status", "200")])
    return client, server


def test_the_frames_are_the_bytes_h2_writes_and_take_the_same_windows() -> None:
    payloads = [b"id:1\ndata:one\n\n", b"x" * 300, b"id:3\ndata:three\n\n"]
    _, by_h2 = open_pair()
    _, by_us = open_pair()
    out = bytearray()
    for payload in payloads:
        by_h2.send_data(1, payload)
        assert append_data_frame(by_us, 1, payload, out)
    assert bytes(out) + by_us.data_to_send() == by_h2.data_to_send()
    assert by_us.local_flow_control_window(1) == by_h2.local_flow_control_window(1)
    assert by_us.outbound_flow_control_window == by_h2.outbound_flow_control_window


def test_a_client_reads_every_frame_as_data_of_its_stream() -> None:
    client, server = open_pair()
    out = bytearray()
    assert append_data_frame(server, 1, b"id:1\ndata:a\n\n", out)
    server.send_data(1, b"id:2\ndata:b\n\n", end_stream=True)  # the last one goes through h2
    events = client.receive_data(bytes(out) + server.data_to_send())
    data = b"".join(e.data for e in events if isinstance(e, h2.events.DataReceived))
    assert data == b"id:1\ndata:a\n\nid:2\ndata:b\n\n"
    assert any(isinstance(e, h2.events.StreamEnded) for e in events)


def test_a_stream_h2_has_closed_or_never_knew_is_left_to_h2() -> None:
    _, server = open_pair()
    server.send_data(1, b"bye", end_stream=True)
    out = bytearray()
    assert not append_data_frame(server, 1, b"more", out)
    assert not append_data_frame(server, 3, b"never opened", out)
    assert not out
    with pytest.raises(h2.exceptions.StreamClosedError):
        server.send_data(1, b"more")


def test_a_closed_connection_is_left_to_h2() -> None:
    _, server = open_pair()
    server.close_connection()
    assert not append_data_frame(server, 1, b"late", bytearray())


def test_empty_data_is_left_to_h2() -> None:
    _, server = open_pair()
    assert not append_data_frame(server, 1, b"", bytearray())

"""DATA frames for open HTTP/2 streams, written without the ``h2`` library's per-frame path.

``H2Connection.send_data`` runs the connection's and the stream's state machines, builds a frame
object, serializes it and logs twice: about 4 µs per frame on this project's machines, paid once
per event per subscriber on a fan-out. For a frame without ``END_STREAM`` on a stream that is
``OPEN`` or ``HALF_CLOSED_REMOTE`` on an open connection, all of that changes nothing but the two
outbound flow-control windows, so :func:`append_data_frame` builds the 9-byte header itself and
takes the frame's size off both windows, in about 0.5 µs. The frame goes into the caller's
buffer, after what ``h2`` had queued (taken with ``data_to_send``, so the order of the frames
stays the one they were produced in); only ``h2``'s public attributes are used.

Anything else (the last frame of a stream, a stream ``h2`` has closed or never knew, a closing
connection) returns ``False``, and the caller uses ``send_data``, which raises what it should.
The caller keeps the size within the window and the peer's maximum frame size, as it must for
``send_data`` too.
"""

from __future__ import annotations

import struct

import h2.connection
from h2.connection import ConnectionState
from h2.stream import StreamState

_HEADER = struct.Struct(">HBBBI")
"""Length (24 bits, as 16 + 8), type 0 (DATA), flags 0, stream id (reserved bit 0)."""
_SENDING = frozenset({StreamState.OPEN, StreamState.HALF_CLOSED_REMOTE})


def append_data_frame(
    conn: h2.connection.H2Connection, stream_id: int, data: bytes, out: bytearray
) -> bool:
    """Append to ``out`` what ``conn`` has queued, then ``data`` as one DATA frame on
    ``stream_id``; ``False``, and ``out`` untouched, when ``send_data`` must send it."""
    if not data or conn.state_machine.state is not ConnectionState.SERVER_OPEN:
        return False
    stream = conn.streams.get(stream_id)
    if stream is None or stream.state_machine.state not in _SENDING:
        return False
    size = len(data)
    out += conn.data_to_send()
    out += _HEADER.pack(size >> 8, size & 0xFF, 0, 0, stream_id)
    out += data
    stream.outbound_flow_control_window -= size
    conn.outbound_flow_control_window -= size
    return True

"""The SSE wire codec: :mod:`.encoder` writes ``text/event-stream``, :mod:`.parser` reads it.

Both are pure and synchronous; the SSE server binding encodes with the one, the upstream SSE
client parses with the other.
"""

from ssegate.sse_codec.encoder import KEEP_ALIVE, encode_comment, encode_event, encode_retry
from ssegate.sse_codec.parser import (
    DEFAULT_MAX_EVENT_SIZE,
    SseEvent,
    SseIdOnly,
    SseParseError,
    SseParser,
)

__all__ = [
    "DEFAULT_MAX_EVENT_SIZE",
    "KEEP_ALIVE",
    "SseEvent",
    "SseIdOnly",
    "SseParseError",
    "SseParser",
    "encode_comment",
    "encode_event",
    "encode_retry",
]

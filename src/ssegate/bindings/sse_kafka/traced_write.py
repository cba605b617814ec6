"""A subscriber's write while a batch with traced records fans out (delivery traces).

:class:`~.subscriber.TopicSubscriber` writes a batch with one ``write_encoded`` call into its
sink: one stream, or the :class:`~ssegate.bindings.sse.fanout.SinkGroup` of its broadcast. While
:data:`~ssegate.telemetry.traces.DELIVERY` has a batch under way (its one test per write, made
by the subscriber), :func:`write_traced` makes that call instead and tells the batch's trace
what the write reached: the streams written (what their socket did not take waits in their
connection), those of them whose client the write found not reading (they stall: their source
writes them no more until they read again), and those the write closed as too slow. The trace
itself (which records the write carried) is the telemetry's; this module only knows how to count
a sink's streams.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from ssegate.bindings.sse.fanout import SinkGroup
from ssegate.bindings.sse.server import DownstreamStream
from ssegate.bindings.sse.source import SseSink
from ssegate.kafka.topics import KafkaMessage
from ssegate.telemetry.traces import BatchTrace


def write_traced(
    trace: BatchTrace,
    sink: SseSink,
    data: bytes,
    messages: Sequence[KafkaMessage],
    accepts: Callable[[KafkaMessage], bool] | None,
) -> None:
    """``sink.write_encoded(data)``, reported to ``trace`` as a write of ``messages`` through a
    filter that ``accepts`` them."""
    members = len(sink) if isinstance(sink, SinkGroup) else 1
    started = time.time_ns()
    sink.write_encoded(data)
    ended = time.time_ns()
    if isinstance(sink, SinkGroup):  # a member that stalls in the write leaves the group
        stalled = sink.stalled
        dropped = max(0, members - len(sink) - stalled)
    else:
        stalled = int(isinstance(sink, DownstreamStream) and sink.stalled and not sink.closed)
        dropped = int(sink.closed)
    written = max(0, members - dropped)
    trace.written(messages, accepts, (written, stalled, dropped), started, ended)

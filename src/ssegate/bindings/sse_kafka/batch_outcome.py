"""What one batch of messages writes for one subscriber shape and progress: :func:`work_out`.

The pure core of :meth:`~.subscriber.TopicSubscriber.on_messages`: no sink, no clock, no loop.
It runs once per batch per stream alone, and once per broadcast (:mod:`~.broadcast`) for all the
streams in step.

- Per message the progress moves past it, then the shape's filter decides: a message it drops
  writes nothing and is counted in ``skipped`` (reset by every message written after it).
- A message written is ``id:<progress>`` (in the shape's id format, with the message's etag and
  key) followed by its shared ``event:``/``data:`` block (:class:`~.shared.EncodedMessages`,
  which applies the shape's value view and check once per message per process).
- A shape that asked for ``ext=timestamp`` writes ``timestamp:0x<hex>`` (the record's timestamp,
  milliseconds since the epoch) before each message's ``id:``.
- The blocks of a batch are joined into one ``bytes``, to be written with one call; ``None``
  when the filter dropped every message.
"""

from __future__ import annotations

from collections.abc import Sequence

from ssegate.bindings.sse_kafka.event_id import ProgressEncoder, format_event_id
from ssegate.bindings.sse_kafka.shared import BatchOutcome, EncodedMessages, SubscriberShape
from ssegate.kafka.topics import KafkaMessage
from ssegate.sse_codec.encoder import timestamp_line


def work_out(
    messages: Sequence[KafkaMessage],
    shape: SubscriberShape,
    progress: ProgressEncoder,
    encoded: EncodedMessages,
) -> BatchOutcome:
    """Move ``progress`` through ``messages`` and encode what ``shape`` writes for them."""
    accepts = shape.filter.matches if shape.filter is not None else None
    get = encoded.get
    view = shape.view
    check = shape.check
    id_format = shape.id_format
    timestamps = shape.timestamps
    out: list[bytes] = []
    skipped = 0
    for message in messages:
        progress.advance(message.partition, message.offset + 1)
        if accepts is not None and not accepts(message):
            skipped += 1
            continue
        skipped = 0
        shared = get(message, view, check)
        event_id = format_event_id(progress.token(), shared.etag, id_format, shared.key64)
        if timestamps:
            out.append(timestamp_line(message.timestamp_ms))
        out.append(b"id:" + event_id.encode() + b"\n" + shared.block)
    data = (b"".join(out) if len(out) > 1 else out[0]) if out else None
    return BatchOutcome(data, progress.token(), skipped)

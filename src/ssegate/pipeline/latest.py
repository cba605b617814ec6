"""The ``latest`` sink: the newest record per key for a compacted topic, and a tombstone for a
key that went silent.

It runs on Spark's ``applyInPandasWithState`` with an **event-time** timeout: per key the state
holds the event time and headers of the newest record seen; every record that is newer is
emitted as the key's new value, and the key's timeout is set to ``newest + silent_after``. Once
the source's watermark (the newest event time seen, minus the source's ``watermark`` delay)
passes that point with no newer record, Spark calls back with the group timed out and a
tombstone (null value, the key's last headers) is emitted and the state dropped.

Event time rather than processing time makes the outcome a function of the input alone: the
same records give the same tombstones on ``local[2]``, on a cluster, and after a restart from
the checkpoint. The cost: a silence is only noticed when other keys' records move the watermark.

A key's new value has the id of the input record it comes from (of those of a micro-batch, the
one with the newest event time, then the greatest id: the same one when the micro-batch is run
again); a tombstone's id is ``<sink>@silent/<newest event time, epoch ms>/<key>``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ssegate.pipeline.config import Latest, duration_seconds

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.streaming.state import GroupState

OUTPUT_SCHEMA = "key string, value string, headers string, id string"
STATE_SCHEMA = "newest_ms long, headers string"


def latest_per_key(
    rows: DataFrame,
    latest: Latest,
    event_time: str,
    name: str,
    key: Column,
    value: Column,
    headers: Column,
) -> DataFrame:
    """Rows of ``key``/``value``/``headers`` (JSON text)/``id`` for the Kafka sink of sink
    ``name``, in update mode; ``rows`` has the input record's id in ``_id``."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    silent_ms = int(duration_seconds(latest.silent_after) * 1000)

    def newest_or_tombstone(
        group: tuple[Any, ...], frames: Iterable[Any], state: GroupState
    ) -> Iterator[Any]:  # pandas.DataFrame both ways
        yield from _newest_or_tombstone(group, frames, state, silent_ms, name)

    keyed = rows.select(
        F.col(event_time),  # carries the watermark the event-time timeout runs on
        key.cast("string").alias("_group"),
        F.unix_millis(F.col(event_time)).alias("_event_ms"),
        value.alias("_value"),
        headers.alias("_headers"),
        F.col("_id"),
    ).where(F.col("_group").isNotNull() & F.col("_event_ms").isNotNull())
    return keyed.groupBy("_group").applyInPandasWithState(
        newest_or_tombstone,
        outputStructType=OUTPUT_SCHEMA,
        stateStructType=STATE_SCHEMA,
        outputMode="update",
        timeoutConf=GroupStateTimeout.EventTimeTimeout,
    )


def _newest_or_tombstone(
    group: tuple[Any, ...], frames: Iterable[Any], state: GroupState, silent_ms: int, name: str
) -> Iterator[Any]:
    import pandas as pd  # type: ignore[import-untyped]  # no stubs installed

    (key,) = group
    if state.hasTimedOut:
        newest_ms, headers = state.get
        state.remove()
        tombstone = f"{name}@silent/{int(newest_ms)}/{key}"
        yield pd.DataFrame(
            {"key": [key], "value": [None], "headers": [headers], "id": [tombstone]}, dtype=object
        )
        return
    newest_ms = int(state.get[0]) if state.exists else -1
    newest: Any = None  # the row to write: the newest of this micro-batch, if not older
    for frame in frames:
        if frame.empty:
            continue
        row = frame.sort_values(["_event_ms", "_id"]).iloc[-1]
        if newest is None or (row["_event_ms"], row["_id"]) > (newest["_event_ms"], newest["_id"]):
            newest = row
    if newest is not None and int(newest["_event_ms"]) >= newest_ms:
        newest_ms = int(newest["_event_ms"])
        state.update((newest_ms, newest["_headers"]))
    else:
        newest = None
    watermark = state.getCurrentWatermarkMs()
    state.setTimeoutTimestamp(max(newest_ms + silent_ms, watermark + 1))
    if newest is not None:
        yield pd.DataFrame(
            {"key": [key], "value": [newest["_value"]], "headers": [newest["_headers"]],
             "id": [newest["_id"]]},
            dtype=object,
        )  # fmt: skip

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
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ssegate.pipeline.config import Latest, duration_seconds

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.streaming.state import GroupState

OUTPUT_SCHEMA = "key string, value string, headers string"
STATE_SCHEMA = "newest_ms long, headers string"


def latest_per_key(
    rows: DataFrame, latest: Latest, event_time: str, key: Column, value: Column, headers: Column
) -> DataFrame:
    """Rows of ``key``/``value``/``headers`` (JSON text) for the Kafka sink, in update mode."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    silent_ms = int(duration_seconds(latest.silent_after) * 1000)

    def newest_or_tombstone(
        group: tuple[Any, ...], frames: Iterable[Any], state: GroupState
    ) -> Iterator[Any]:  # pandas.DataFrame both ways
        yield from _newest_or_tombstone(group, frames, state, silent_ms)

    keyed = rows.select(
        F.col(event_time),  # carries the watermark the event-time timeout runs on
        key.cast("string").alias("_group"),
        F.unix_millis(F.col(event_time)).alias("_event_ms"),
        value.alias("_value"),
        headers.alias("_headers"),
    ).where(F.col("_group").isNotNull() & F.col("_event_ms").isNotNull())
    return keyed.groupBy("_group").applyInPandasWithState(
        newest_or_tombstone,
        outputStructType=OUTPUT_SCHEMA,
        stateStructType=STATE_SCHEMA,
        outputMode="update",
        timeoutConf=GroupStateTimeout.EventTimeTimeout,
    )


def _newest_or_tombstone(
    group: tuple[Any, ...], frames: Iterable[Any], state: GroupState, silent_ms: int
) -> Iterator[Any]:
    import pandas as pd  # type: ignore[import-untyped]  # no stubs installed

    (key,) = group
    if state.hasTimedOut:
        _, headers = state.get
        state.remove()
        yield pd.DataFrame({"key": [key], "value": [None], "headers": [headers]}, dtype=object)
        return
    newest_ms, newest_value, newest_headers = -1, None, None
    if state.exists:
        newest_ms = int(state.get[0])
    changed = False
    for frame in frames:
        if frame.empty:
            continue
        row = frame.loc[frame["_event_ms"].idxmax()]
        if int(row["_event_ms"]) >= newest_ms:
            newest_ms, newest_value, newest_headers = (
                int(row["_event_ms"]), row["_value"], row["_headers"])  # fmt: skip
            changed = True
    if changed:
        state.update((newest_ms, newest_headers))
    watermark = state.getCurrentWatermarkMs()
    state.setTimeoutTimestamp(max(newest_ms + silent_ms, watermark + 1))
    if changed:
        yield pd.DataFrame(
            {"key": [key], "value": [newest_value], "headers": [newest_headers]}, dtype=object
        )

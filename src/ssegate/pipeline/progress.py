"""Rows a pipeline's stateful queries drop as later than their watermark: logged and counted.

A windowed or ``latest`` query keeps its state per window or key until the watermark passes
it. A row whose event time is already behind the watermark cannot join a window that was
emitted and closed, and Spark drops it, as a watermark must. Spark says so only in the query's
progress after each micro-batch (``numRowsDroppedByWatermark`` of each state operator), so a
pipeline that does not read it loses those rows without a word.

:class:`LateRows` reads the progress each query keeps (``recentProgress``: the last 100
micro-batches unless ``spark.sql.streaming.numRecentProgressUpdates`` says otherwise) and looks
at every micro-batch once, by its id. Each one that dropped rows is a warning
``pipeline.late_rows`` (the query, the batch, how many rows, the watermark then) and adds to the
query's total, which :meth:`LateRows.log_totals` logs when the pipeline stops. ``ssegate
pipeline run`` checks every :data:`CHECK_SECONDS` and once more at the stop.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ssegate.telemetry.log import event, warning

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery

CHECK_SECONDS = 5.0
"""How often ``ssegate pipeline run`` reads its queries' progress (20 micro-batches at the
default 100 ms trigger, well within the 100 each query keeps)."""


@dataclass(frozen=True, slots=True)
class BatchLateRows:
    """What one micro-batch of a query dropped as late."""

    batch: int
    rows: int
    watermark: str
    """The watermark the batch ran with (Spark's ISO-8601 text; empty without one)."""


class LateRows:
    """Each query's micro-batches seen so far, and the late rows they dropped."""

    def __init__(self) -> None:
        self._last_batch: dict[str, int] = {}
        self.totals: dict[str, int] = {}
        """Late rows dropped per query, since the pipeline started."""

    def observe(self, query: str, batches: Iterable[BatchLateRows]) -> list[BatchLateRows]:
        """The batches of ``query`` not observed before that dropped rows (pure)."""
        last = self._last_batch.get(query, -1)
        new = [batch for batch in batches if batch.batch > last]
        if new:
            self._last_batch[query] = max(batch.batch for batch in new)
        dropped = [batch for batch in new if batch.rows > 0]
        for batch in dropped:
            self.totals[query] = self.totals.get(query, 0) + batch.rows
        return dropped

    def check(self, queries: Sequence[StreamingQuery]) -> None:
        """Read every query's recent progress; a warning for each batch that dropped rows. A
        query whose progress cannot be read (its driver going away) is a warning too."""
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException

        for query in queries:
            name = query.name or str(query.id)
            try:
                batches = _batches(query)
            except (PySparkException, Py4JError) as exc:
                warning("pipeline.progress_unreadable", query=name, reason=str(exc)[:300])
                continue
            for batch in self.observe(name, batches):
                warning(
                    "pipeline.late_rows",
                    query=name,
                    batch=batch.batch,
                    rows=batch.rows,
                    watermark=batch.watermark,
                    message=f"{batch.rows} rows were older than the watermark and left out",
                )

    def log_totals(self) -> None:
        """One line per query that dropped late rows, with its total."""
        for name, rows in sorted(self.totals.items()):
            event("pipeline.late_rows_total", query=name, rows=rows)


def _batches(query: StreamingQuery) -> list[BatchLateRows]:
    return [
        BatchLateRows(
            progress.batchId,
            sum(operator.numRowsDroppedByWatermark for operator in progress.stateOperators),
            progress.eventTime.get("watermark", ""),
        )
        for progress in query.recentProgress
    ]

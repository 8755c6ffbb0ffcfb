"""The snapshot service's figures for Prometheus (laredo_core.metrics): its passes and each table's last
compaction, read when scraped. Histograms of every compaction (rows, seconds) come from the OtelObserver."""

from __future__ import annotations

from collections.abc import Callable

from laredo_core.metrics import Figure, Sample, per_table

from laredo_snapshot.application.service import SnapshotService, TableRun


def snapshot_figures(service: SnapshotService) -> list[Figure]:
    def last(value: Callable[[TableRun], float]) -> Callable[[], list[Sample]]:
        return lambda: per_table((table, value(run)) for table, run in service.last.items())

    return [
        Figure("laredo.snapshot.passes", "Passes over the tables completed", lambda: [(service.passes, {})],
               counter=True),
        Figure("laredo.snapshot.compacting", "1 for the table being compacted now",
               lambda: per_table([(service.running, 1)]) if service.running is not None else []),
        Figure("laredo.snapshot.last.finished", "Unix time the table's last compaction ended",
               last(lambda run: run.finished_at)),
        Figure("laredo.snapshot.last.failed", "1 when the table's last compaction failed",
               last(lambda run: bool(run.error))),
        Figure("laredo.snapshot.last.rows", "Rows of the table's last snapshot written",
               last(lambda run: run.manifest.row_count if run.manifest is not None else 0)),
    ]

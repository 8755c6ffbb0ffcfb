"""One pipeline's status from one read of the instances: state, rows, counters, last baseline, indexes (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from laredo_core.coordination.ports import InstanceStatus

from laredo_oam.application.reports import Reports
from laredo_oam.domain.catalog import PipelineKey
from laredo_oam.domain.states import PipelineState, pipeline_state
from laredo_oam.domain.views import AppliedView, BaselineView, IndexView, PipelineView

TargetReports = Sequence[tuple[InstanceStatus, Mapping[str, Any]]]


def pipeline_view(reports: Reports, key: PipelineKey) -> PipelineView:
    ingest = reports.ingest(key.source_id)
    targets = reports.target_tables(key)
    # Several target instances: the least advanced one decides (all must have the baseline to be ready).
    entry = next((e for _, e in targets if not e.get("baseline_complete")), targets[0][1] if targets else None)
    state = pipeline_state(None if ingest is None else ingest.status, entry)
    # Every instance of a target reads the whole stream and records the same letters (one id each in the
    # store), so the count of the instance that failed the most stands for the pipeline; likewise for counts.
    dead_letters = _most(targets, "dead_letters")
    applied, last_change = _applied(targets)
    return PipelineView(key, state, _most(targets, "rows"), _error(key, ingest, state, targets), last_change,
                        dead_letters, applied, _last_baseline(ingest, key), _indexes(targets),
                        _paused_because(key, ingest) if state is PipelineState.PAUSED else "")


def _error(key: PipelineKey, ingest: InstanceStatus | None, state: PipelineState, targets: TargetReports) -> str:
    if ingest is None:
        return f"no ingest instance reports source {key.source_id}; is laredo-ingest running with heartbeats on?"
    if state is PipelineState.ERROR:
        return str(ingest.status.get("last_error", "")) or "ingest failed"
    if not targets:
        return f"no {key.target_type} instance reports table {key.table} yet"
    return ""


def _most(targets: TargetReports, name: str) -> int:
    return max((_int(e.get(name)) for _, e in targets), default=0)


def _applied(targets: TargetReports) -> tuple[AppliedView, int]:
    """The changes applied by action, and the source commit time of the newest one (0: none since the
    instances started): the pipeline's last change, not the time of a heartbeat."""
    counts = [e["applied"] for _, e in targets if isinstance(e.get("applied"), Mapping)]

    def most(name: str) -> int:
        return max((_int(c.get(name)) for c in counts), default=0)

    return AppliedView(*map(most, ("inserts", "updates", "deletes", "truncates"))), most("last_change_unix_ms")


def _last_baseline(ingest: InstanceStatus | None, key: PipelineKey) -> BaselineView | None:
    baselines = ingest.status.get("baselines") if ingest is not None else None
    record = baselines.get(str(key.table)) if isinstance(baselines, Mapping) else None
    if not isinstance(record, Mapping) or not record.get("cause"):
        return None
    return BaselineView(str(record["cause"]), str(record.get("detail", "")), str(record.get("baseline_id", "")),
                        _int(record.get("started_unix_ms")))


def _indexes(targets: TargetReports) -> tuple[IndexView, ...]:
    """The secondary indexes the first instance reporting any has (every instance builds the same ones)."""
    reported = next((e["indexes"] for _, e in targets if isinstance(e.get("indexes"), Mapping) and e["indexes"]), {})
    return tuple(IndexView(str(name), tuple(map(str, index.get("fields") or ())), bool(index.get("unique")),
                           _int(index.get("keys")))
                 for name, index in sorted(reported.items()) if isinstance(index, Mapping))


def _paused_because(key: PipelineKey, ingest: InstanceStatus | None) -> str:
    """Why a paused pipeline does not serve current data: what the source's ingest says about the WAL waiting."""
    report = ingest.status if ingest is not None else {}
    behind = _int(report.get("lag_bytes"))
    wal = f"its slot is {behind} bytes of WAL behind" if behind else "no WAL seen waiting yet"
    return (f"source {key.source_id} is paused by an operator ({wal}): changes made since are not applied; "
            f"resume it with ResumeSync (laredo resume {key.source_id})")


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0

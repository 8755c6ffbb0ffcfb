"""Status use cases (system, table, pipeline, readiness, sources, tables, schemas) from one read of the instances."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from laredo_core.coordination.ports import InstanceStatus

from laredo_oam.application.reports import Reports
from laredo_oam.domain.catalog import Catalog, ConfiguredTable, PipelineKey, table_from_request
from laredo_oam.domain.errors import InvalidRequest, PreconditionFailed
from laredo_oam.domain.states import PipelineState, is_ready, mapping_in, pipeline_state, service_state
from laredo_oam.domain.views import (
    AppliedView,
    BaselineView,
    ColumnView,
    IndexView,
    PipelineView,
    Readiness,
    SourceView,
    SystemStatus,
    TableListing,
)
from laredo_oam.ports import CoordinationStore

#: The services whose instances heartbeat into the coordination store.
SERVICES = ("ingest", "fanout", "query", "snapshot")
TargetReports = Sequence[tuple[InstanceStatus, Mapping[str, Any]]]


class StatusView:
    """Answers status questions from configuration plus what the instances heartbeat right now."""

    def __init__(self, store: CoordinationStore, catalog: Catalog) -> None:
        self._store = store
        self.catalog = catalog

    async def system_status(self) -> SystemStatus:
        return system_status_of(await Reports.read(self._store), self.catalog)

    async def table_status(self, schema: str, table: str) -> tuple[PipelineView, ...]:
        configured = self.catalog.require_table(table_from_request(schema, table))
        return _pipelines(await Reports.read(self._store), tuple(p for t in configured for p in t.pipelines()))

    async def pipeline_status(self, pipeline_id: str) -> PipelineView:
        key = self.catalog.require_pipeline(pipeline_id)
        return pipeline_view(await Reports.read(self._store), key)

    async def check_ready(self, source: str = "", table: str = "", pipeline_id: str = "") -> Readiness:
        """Readiness of one pipeline, a table's pipelines, a source's pipelines, or everything (in that order)."""
        if pipeline_id:
            keys: tuple[PipelineKey, ...] = (self.catalog.require_pipeline(pipeline_id),)
        elif table:
            keys = tuple(p for t in self.catalog.require_table(table_from_request("", table)) for p in t.pipelines())
        else:
            keys = self.catalog.pipelines()
        reports = await Reports.read(self._store)
        if source:
            reports.require_source(self.catalog, source)
            keys = tuple(k for k in keys if k.source_id == source)
        reasons = [reason for view in _pipelines(reports, keys) for reason in _not_ready(view)]
        reasons += [f"fan-out instance {i.instance_id} is draining" for i in reports.of("fanout")
                    if i.status.get("draining")]
        if not keys:
            reasons.append("no pipeline is configured here: add tables with targets to the configuration")
        return Readiness(not reasons, tuple(reasons))

    async def instances(self, service: str = "") -> tuple[InstanceStatus, ...]:
        """The live instances (of one service), as their last heartbeats report them."""
        if service and service not in SERVICES:
            raise InvalidRequest(f"service {service!r} is not a Laredo service; name one of {', '.join(SERVICES)} "
                                 "(or none for every service)")
        reports = await Reports.read(self._store)
        return tuple(sorted((i for i in reports.instances if not service or i.service == service),
                            key=lambda i: (i.service, i.instance_id)))

    async def source_info(self, source_id: str = "") -> tuple[SourceView, ...]:
        reports = await Reports.read(self._store)
        wanted = reports.require_source(self.catalog, source_id) if source_id else reports.source_ids(self.catalog)
        return tuple(_source(self.catalog, reports, s) for s in wanted)

    async def list_tables(self) -> tuple[TableListing, ...]:
        reports = await Reports.read(self._store)
        return tuple(TableListing(t, _primary_key(t, reports.reported_columns(t.table))) for t in self.catalog.tables)

    async def table_schema(self, schema: str, table: str) -> tuple[ColumnView, ...]:
        table_id = table_from_request(schema, table)
        self.catalog.require_table(table_id)
        reported = (await Reports.read(self._store)).reported_columns(table_id)
        if not reported:
            raise PreconditionFailed(f"no running service has reported the columns of {table_id} yet; they are "
                                     "known once its pipeline has started (check GetTableStatus)")
        return tuple(_column(position, column) for position, column in enumerate(reported, start=1))


def _pipelines(reports: Reports, keys: tuple[PipelineKey, ...]) -> tuple[PipelineView, ...]:
    return tuple(pipeline_view(reports, key) for key in keys)


def system_status_of(reports: Reports, catalog: Catalog) -> SystemStatus:
    """The whole system's status from one read of the instances (pure: GetStatus and WatchStatus share it)."""
    pipelines = _pipelines(reports, catalog.pipelines())
    sources = tuple(_source(catalog, reports, s) for s in reports.source_ids(catalog))
    phases = [str(s.details.get("phase", "")) for s in sources if s.reporting]
    last_change = max((p.last_change_unix_ms for p in pipelines), default=0)
    started = min((i.started_unix_ms for i in reports.instances if i.started_unix_ms), default=0)
    return SystemStatus(service_state(phases, (p.state for p in pipelines)), sources, pipelines, last_change,
                        started)


def _source(catalog: Catalog, reports: Reports, source_id: str) -> SourceView:
    configured = catalog.source(source_id)
    base = SourceView(source_id, *(() if configured is None else (configured.source_type,
                                                                   configured.supports_resume)))
    instance = reports.ingest(source_id)
    if instance is None:
        return base
    report = instance.status
    started = {"instance_started_unix_ms": instance.started_unix_ms} if instance.started_unix_ms else {}
    return SourceView(base.source_id, base.source_type, base.supports_resume,
                      str(report.get("received_lsn", "")), str(report.get("confirmed_lsn", "")),
                      int(report.get("lag_bytes", 0) or 0), float(report.get("lag_seconds", 0) or 0),
                      {"instance_id": instance.instance_id, **started, **report}, reporting=True)


def _not_ready(view: PipelineView) -> list[str]:
    if is_ready(view.state):
        return []
    because = view.error_message or view.paused_because
    why = f": {because}" if because else ""
    return [f"pipeline {view.pipeline_id} is {view.state.value}{why}"]


def _column(position: int, column: Any) -> ColumnView:
    if not isinstance(column, Mapping):
        return ColumnView(position, str(column))
    return ColumnView(int(column.get("ordinal_position", position)), str(column.get("name", "")),
                      str(column.get("type", column.get("data_type", ""))), bool(column.get("not_null", False)),
                      int(column.get("primary_key_ordinal", 0) or 0))


def _primary_key(table: ConfiguredTable, reported: list[Any]) -> tuple[str, ...]:
    """A primary key configured on a target, else the key columns reported, in key order."""
    configured = next((t.options["primary_key"] for t in table.targets if t.options.get("primary_key")), None)
    if isinstance(configured, str):
        return tuple(name.strip() for name in configured.split(",") if name.strip())
    if isinstance(configured, list):
        return tuple(str(name) for name in configured)
    columns = [_column(position, column) for position, column in enumerate(reported, start=1)]
    return tuple(c.name for c in sorted((c for c in columns if c.primary_key_ordinal > 0),
                                        key=lambda c: c.primary_key_ordinal))


def pipeline_view(reports: Reports, key: PipelineKey) -> PipelineView:
    ingest = reports.ingest(key.source_id)
    targets = reports.target_tables(key)
    # Several target instances: the least advanced one decides (all must have the baseline to be ready).
    entry = next((e for _, e in targets if not e.get("baseline_complete")), targets[0][1] if targets else None)
    state = pipeline_state(None if ingest is None else ingest.status, entry)
    # Every instance of a target reads the whole stream and records the same letters (one id each in the
    # store), so the count of the instance that failed the most stands for the pipeline; likewise for counts.
    entries = [e for _, e in targets]
    dead_letters = _most(entries, "dead_letters")
    applied, last_change = _applied(targets)
    return PipelineView(key, state, _most(entries, "rows"), _error(key, ingest, state, targets), last_change,
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


def _most(entries: Iterable[Mapping[str, Any]], name: str) -> int:
    return max((_int(e.get(name)) for e in entries), default=0)


def _applied(targets: TargetReports) -> tuple[AppliedView, int]:
    """The changes applied by action, and the source commit time of the newest one (0: none since the
    instances started): the pipeline's last change, not the time of a heartbeat."""
    counts = [e["applied"] for _, e in targets if isinstance(e.get("applied"), Mapping)]
    return (AppliedView(*(_most(counts, name) for name in ("inserts", "updates", "deletes", "truncates"))),
            _most(counts, "last_change_unix_ms"))


def _last_baseline(ingest: InstanceStatus | None, key: PipelineKey) -> BaselineView | None:
    record = mapping_in(ingest.status, "baselines").get(str(key.table)) if ingest is not None else None
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

"""What OAM answers: value types of sources, pipelines, readiness and the whole system's status."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from laredo_oam.domain.catalog import ConfiguredTable, PipelineKey
from laredo_oam.domain.states import PipelineState, ServiceState


@dataclass(frozen=True, slots=True)
class SourceView:
    source_id: str
    source_type: str = "postgresql"
    supports_resume: bool = True
    current_position: str = ""  # how far the server has sent WAL
    acked_position: str = ""  # what the slot confirmed
    lag_bytes: int = 0
    lag_seconds: float = 0.0
    details: Mapping[str, Any] = field(default_factory=dict)  # the ingest leader's whole report
    reporting: bool = False  # an ingest instance heartbeats for this source


@dataclass(frozen=True, slots=True)
class AppliedView:
    """Changes of transactions a pipeline's target applied since its instance started, by action."""

    inserts: int = 0
    updates: int = 0
    deletes: int = 0
    truncates: int = 0


@dataclass(frozen=True, slots=True)
class BaselineView:
    """A table's last baseline as its source's ingest reports it: why, which one, when it started."""

    reason: str  # the cause: "initial", "slot dropped", "operator reset", "operator reload", ...
    detail: str = ""
    baseline_id: str = ""
    started_unix_ms: int = 0


@dataclass(frozen=True, slots=True)
class IndexView:
    name: str
    fields: tuple[str, ...] = ()
    unique: bool = False
    entry_count: int = 0  # distinct keys held


@dataclass(frozen=True, slots=True)
class PipelineView:
    key: PipelineKey
    state: PipelineState
    row_count: int = 0
    error_message: str = ""
    last_change_unix_ms: int = 0  # source commit time of the newest change its targets applied; 0 = none yet
    dead_letter_count: int = 0  # changes its target instances could not apply since they started (the most any reports)
    applied: AppliedView = AppliedView()  # the most any of its target instances reports
    last_baseline: BaselineView | None = None  # None: ingest does not report one (yet)
    indexes: tuple[IndexView, ...] = ()  # indexed-memory targets: as the first instance reporting them has them
    #: Paused pipelines: why they do not serve current data (the source is paused, WAL may be waiting).
    paused_because: str = ""

    @property
    def pipeline_id(self) -> str:
        return self.key.pipeline_id


@dataclass(frozen=True, slots=True)
class Readiness:
    ready: bool
    not_ready_reasons: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SystemStatus:
    state: ServiceState
    sources: tuple[SourceView, ...] = ()
    pipelines: tuple[PipelineView, ...] = ()
    last_change_unix_ms: int = 0  # the newest of its pipelines' last changes
    started_unix_ms: int = 0  # when the longest-running live instance started; 0 = none reports it


@dataclass(frozen=True, slots=True)
class SnapshotSummaryView:
    """What the snapshot stores hold, for GetStatus."""

    enabled: bool
    store_type: str = ""  # local, s3 (several: joined with ",")
    last_snapshot_id: str = ""
    last_snapshot_unix_ms: int = 0
    snapshot_count: int = 0


@dataclass(frozen=True, slots=True)
class ColumnView:
    ordinal_position: int
    name: str
    data_type: str = ""
    not_null: bool = False
    primary_key_ordinal: int = 0  # 0 = not part of the primary key


@dataclass(frozen=True, slots=True)
class TableListing:
    """A configured table and its primary key: configured, else as the running services report its columns."""

    table: ConfiguredTable
    primary_key: tuple[str, ...] = ()  # () = not known yet (no service has reported the columns)

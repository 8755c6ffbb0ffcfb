"""What OAM answers: value types of sources, pipelines, readiness and the whole system's status."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from laredo_oam.domain.catalog import PipelineKey
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
class PipelineView:
    key: PipelineKey
    state: PipelineState
    row_count: int = 0
    error_message: str = ""
    last_change_unix_ms: int = 0
    dead_letter_count: int = 0  # changes its target instances could not apply since they started (the most any reports)

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
    last_change_unix_ms: int = 0


@dataclass(frozen=True, slots=True)
class ColumnView:
    ordinal_position: int
    name: str
    data_type: str = ""
    not_null: bool = False
    primary_key_ordinal: int = 0  # 0 = not part of the primary key

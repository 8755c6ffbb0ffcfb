"""Service and pipeline states and the pure rules deriving them from what instances report."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any


class ServiceState(enum.Enum):
    STARTING = "starting"
    BASELINING = "baselining"
    STREAMING = "streaming"
    PAUSED = "paused"
    RELOADING = "reloading"
    ERROR = "error"


class PipelineState(enum.Enum):
    INITIALIZING = "initializing"
    BASELINING = "baselining"
    STREAMING = "streaming"
    PAUSED = "paused"
    ERROR = "error"
    STOPPED = "stopped"


#: Ingest phases (laredo_ingest IngestStatus.report()["phase"]) as the pipeline state they imply.
_INGEST_PHASES = {
    "standby": PipelineState.INITIALIZING, "starting": PipelineState.INITIALIZING,
    "baseline": PipelineState.BASELINING, "rebaseline": PipelineState.BASELINING,
    "streaming": PipelineState.STREAMING, "paused": PipelineState.PAUSED,
    "reconnecting": PipelineState.INITIALIZING, "stopped": PipelineState.STOPPED, "failed": PipelineState.ERROR,
}

#: Which service runs each target type's pipelines.
TARGET_SERVICES = {"replication-fanout": "fanout", "indexed-memory": "query"}


def pipeline_state(ingest: Mapping[str, Any] | None, target_table: Mapping[str, Any] | None) -> PipelineState:
    """The state of one pipeline from its source's ingest report and its target's report of the table.

    The source's own state wins while it is not streaming (paused, failed, baselining); once it streams the
    target decides: no report yet = INITIALIZING, baseline not complete = BASELINING, else STREAMING.
    """
    if ingest is None:
        return PipelineState.STOPPED
    state = _INGEST_PHASES.get(str(ingest.get("phase", "")), PipelineState.INITIALIZING)
    if state is PipelineState.STREAMING and not ingest.get("baseline_complete", True):
        state = PipelineState.BASELINING
    if state is not PipelineState.STREAMING:
        return state
    if target_table is None:
        return PipelineState.INITIALIZING
    if not target_table.get("baseline_complete", False):
        return PipelineState.BASELINING
    return PipelineState.STREAMING


def service_state(ingest_phases: Iterable[str], pipelines: Iterable[PipelineState]) -> ServiceState:
    """The whole system's state: an error anywhere, then paused, reloading, baselining, streaming."""
    phases, states = set(ingest_phases), set(pipelines)
    if PipelineState.ERROR in states or "failed" in phases:
        return ServiceState.ERROR
    if PipelineState.PAUSED in states or "paused" in phases:
        return ServiceState.PAUSED
    if "rebaseline" in phases:
        return ServiceState.RELOADING
    if PipelineState.BASELINING in states or "baseline" in phases:
        return ServiceState.BASELINING
    if states and states == {PipelineState.STREAMING}:
        return ServiceState.STREAMING
    return ServiceState.STARTING


def is_ready(state: PipelineState) -> bool:
    """A pipeline serves complete, current data. A paused one is not ready: its target still serves what it
    has, but changes made since the pause are not applied (CheckReady names the pause and the WAL waiting)."""
    return state is PipelineState.STREAMING


def mapping_in(report: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """report[key] when it is a mapping, else {}: reports are JSON that other services write."""
    value = report.get(key)
    return value if isinstance(value, Mapping) else {}

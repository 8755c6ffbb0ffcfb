"""WatchStatus in pure terms: the events, a watcher's filter, and the state changes between two status views."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from laredo_kernel.changes import Action, TableId
from laredo_kernel.position import Position

from laredo_oam.domain.catalog import PipelineKey
from laredo_oam.domain.states import PipelineState, ServiceState
from laredo_oam.domain.views import SourceView, SystemStatus

#: Ingest phases in which the source's replication connection is open.
CONNECTED_PHASES = frozenset({"baseline", "rebaseline", "streaming", "paused"})


class SourceLink(enum.Enum):
    CONNECTED = "connected"
    DISCONNECTED = "disconnected"


@dataclass(frozen=True, slots=True)
class ServiceStateChanged:
    old: ServiceState
    new: ServiceState
    unix_ms: int = 0


@dataclass(frozen=True, slots=True)
class PipelineStateChanged:
    key: PipelineKey
    old: PipelineState
    new: PipelineState
    unix_ms: int = 0


@dataclass(frozen=True, slots=True)
class SourceStateChanged:
    source_id: str
    link: SourceLink
    message: str = ""
    unix_ms: int = 0


@dataclass(frozen=True, slots=True)
class RowChanged:
    """One change of a committed transaction, for one pipeline of its table."""

    key: PipelineKey
    action: Action
    position: str  # laredo_kernel.position.Position text, e.g. 0/16B3748:0
    xid: int
    unix_ms: int = 0


WatchEvent = ServiceStateChanged | PipelineStateChanged | SourceStateChanged | RowChanged


@dataclass(frozen=True, slots=True)
class ObservedChange:
    """A row change read from the change stream (what the ChangeTail port delivers)."""

    source_id: str
    table: TableId
    action: Action
    position: Position
    xid: int


@dataclass(frozen=True, slots=True)
class WatchFilter:
    """Tables and pipelines a watcher asked for; each empty set admits everything, and both must admit.

    Service and source events carry no table or pipeline: every watcher gets them.
    """

    tables: frozenset[TableId] = frozenset()
    pipelines: frozenset[PipelineKey] = frozenset()

    @property
    def everything(self) -> bool:
        return not self.tables and not self.pipelines

    def admits_pipeline(self, key: PipelineKey) -> bool:
        return (not self.tables or key.table in self.tables) and (not self.pipelines or key in self.pipelines)

    def admits(self, event: WatchEvent) -> bool:
        if isinstance(event, (PipelineStateChanged, RowChanged)):
            return self.admits_pipeline(event.key)
        return True


@dataclass(frozen=True, slots=True)
class SourceLinkState:
    connected: bool
    message: str = ""


@dataclass(frozen=True, slots=True)
class StatusSnapshot:
    """What WatchStatus compares: the service state, each pipeline's state, each source's connection."""

    service: ServiceState
    pipelines: Mapping[PipelineKey, PipelineState] = field(default_factory=dict)
    sources: Mapping[str, SourceLinkState] = field(default_factory=dict)


def snapshot_of(status: SystemStatus) -> StatusSnapshot:
    return StatusSnapshot(status.state, {p.key: p.state for p in status.pipelines},
                          {s.source_id: source_link(s) for s in status.sources})


def source_link(view: SourceView) -> SourceLinkState:
    """Connected while the source's ingest instance holds its replication connection (baseline or streaming)."""
    if not view.reporting:
        return SourceLinkState(False, f"no ingest instance reports source {view.source_id}: it stopped or its "
                                      "heartbeat expired")
    phase = str(view.details.get("phase", "")) or "unknown"
    instance = view.details.get("instance_id", "?")
    if phase in CONNECTED_PHASES:
        return SourceLinkState(True, f"ingest instance {instance} reads source {view.source_id} ({phase})")
    error = str(view.details.get("last_error", "")) if phase in ("reconnecting", "failed") else ""
    return SourceLinkState(False, f"ingest instance {instance} of source {view.source_id} is {phase}"
                                  + (f": {error}" if error else ""))


def changes_between(before: StatusSnapshot, after: StatusSnapshot, unix_ms: int) -> list[WatchEvent]:
    """The events that turn `before` into `after`: sources, then pipelines, then the service.

    A source or pipeline absent from a snapshot counts as disconnected / STOPPED; a message change alone is no
    event (only a change of connection is).
    """
    events: list[WatchEvent] = []
    for source_id in sorted(before.sources.keys() | after.sources.keys()):
        gone = SourceLinkState(False, f"no ingest instance reports source {source_id} any more")
        old, new = before.sources.get(source_id, gone), after.sources.get(source_id, gone)
        if old.connected != new.connected:
            link = SourceLink.CONNECTED if new.connected else SourceLink.DISCONNECTED
            events.append(SourceStateChanged(source_id, link, new.message, unix_ms))
    for key, new_state in after.pipelines.items():
        old_state = before.pipelines.get(key, PipelineState.STOPPED)
        if old_state is not new_state:
            events.append(PipelineStateChanged(key, old_state, new_state, unix_ms))
    if before.service is not after.service:
        events.append(ServiceStateChanged(before.service, after.service, unix_ms))
    return events

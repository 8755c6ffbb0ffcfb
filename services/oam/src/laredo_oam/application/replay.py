"""Rebuilds of live tables from snapshots (RestoreSnapshot, StartReplay) and their status and stopping.

A rebuild runs on the instances themselves (laredo_core.rebuild.runner: the snapshot plus the stream tail up to what
the instance has applied, installed as a re-baseline of its live state). OAM picks the fan-out and query instances
that report the snapshot's table, records the rebuild (which instances were asked) as the result of the record id
`<rebuild id>` in the coordination store, and sends each instance a RESTORE or REPLAY command
(laredo_core.rebuild.records). An instance answers once it has started (snapshot found, columns checked); the wait
is bounded by `command_timeout`. Progress comes from the instances' heartbeats (`replays[<id>]`), the outcome of an
instance that forgot the rebuild from its outcome record (records.outcome_id). StopReplay sends STOP_REPLAY to the
instances still running it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from laredo_kernel.changes import TableId
from laredo_core.coordination.ports import Command, CommandKind, CommandResult, CommandStatus
from laredo_core.coordination.records import now_unix_ms
from laredo_core.rebuild.pacing import ReplaySpeed
from laredo_core.rebuild.records import (
    RebuildKind,
    RebuildPhase,
    RebuildReport,
    RebuildRequest,
    RebuildState,
    outcome_id,
)

from laredo_oam.application.commands import answer_lines, command_answers
from laredo_oam.application.reports import Reports, reported_tables
from laredo_oam.application.snapshots import Snapshots, StoredSnapshot, parse_table
from laredo_oam.domain.catalog import Catalog, PipelineKey
from laredo_oam.domain.errors import InvalidRequest, NotFound, PreconditionFailed
from laredo_oam.domain.states import TARGET_SERVICES, mapping_in
from laredo_oam.ports import CoordinationStore

REBUILD_SERVICES = ("fanout", "query")
_COMMANDS = {RebuildKind.RESTORE: CommandKind.RESTORE, RebuildKind.REPLAY: CommandKind.REPLAY}


@dataclass(frozen=True, slots=True)
class Started:
    """What the asked instances answered: accepted only if every one of them started (user_meta: the restored
    snapshot's)."""

    rebuild_id: str
    accepted: bool
    message: str
    warnings: tuple[str, ...] = ()
    user_meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RebuildStatus:
    """One rebuild over every instance that carries it out; `instances` by `<service>:<instance id>`."""

    rebuild_id: str
    state: RebuildState
    rows_replayed: int
    elapsed: float  # seconds from the first start to the last end (or to now while running)
    instances: Mapping[str, RebuildReport] = field(default_factory=dict)


class Rebuilds:
    """RestoreSnapshot, StartReplay, GetReplayStatus and StopReplay through the coordination store (see the module
    docstring)."""

    def __init__(self, store: CoordinationStore, snapshots: Snapshots, catalog: Catalog, *,
                 command_timeout: float = 10.0) -> None:
        self._store = store
        self._snapshots = snapshots
        self._catalog = catalog
        self.command_timeout = command_timeout

    async def restore(self, snapshot_id: str, *, confirm: bool, skip_meta_check: bool) -> Started:
        """Answers once every instance has started; GetReplayStatus follows it by the id the message names."""
        if not snapshot_id.strip():
            raise InvalidRequest("snapshot_id is required: ListSnapshots shows the retained snapshots")
        if "/" in snapshot_id or snapshot_id.startswith("."):
            raise InvalidRequest(f"snapshot_id {snapshot_id!r} is malformed: ids contain no '/' and do not start "
                                 "with '.'; ListSnapshots shows the retained ones")
        if not confirm:
            raise PreconditionFailed(f"restoring snapshot {snapshot_id!r} replaces the rows of its table on every "
                                     "fan-out and query instance (clients receive the differences as changes); "
                                     "repeat the request with confirm=true to do it")
        snapshot = await self._snapshots.find(snapshot_id)
        started = await self._launch(RebuildKind.RESTORE, snapshot, REBUILD_SERVICES, skip_meta_check=skip_meta_check)
        return replace(started, user_meta=snapshot.manifest.user_meta)

    async def start_replay(self, snapshot_id: str, pipeline_id: str, speed: str, tables: Sequence[str]) -> Started:
        if not snapshot_id.strip():
            raise InvalidRequest("snapshot_id is required: ListSnapshots shows the retained snapshots")
        try:
            pace = ReplaySpeed.parse(speed)
        except ValueError as exc:
            raise InvalidRequest(str(exc)) from None
        wanted = [parse_table(t, "tables entry") for t in tables]
        key = self._pipeline(pipeline_id) if pipeline_id.strip() else None
        snapshot = await self._snapshots.find(snapshot_id)
        if key is not None and key.table != snapshot.table:
            raise InvalidRequest(f"snapshot {snapshot_id!r} holds {snapshot.table}, not {key.table} of pipeline "
                                 f"{pipeline_id!r}")
        if wanted and snapshot.table not in wanted:
            raise InvalidRequest(f"snapshot {snapshot_id!r} holds only {snapshot.table}; tables names "
                                 f"{', '.join(map(str, wanted))}")
        services = (TARGET_SERVICES[key.target_type],) if key is not None else REBUILD_SERVICES
        return await self._launch(RebuildKind.REPLAY, snapshot, services, speed=pace)

    async def _launch(self, kind: RebuildKind, snapshot: StoredSnapshot, services: Sequence[str], *,
                      speed: ReplaySpeed | None = None, skip_meta_check: bool = False) -> Started:
        table = snapshot.table
        reports = await Reports.read(self._store)
        targets = [f"{i.service}:{i.instance_id}" for service in services for i in reports.of(service)
                   if str(table) in reported_tables(i)]
        if not targets:
            return Started("", False, f"no {' or '.join(services)} instance serves {table}: nothing to {kind.value}")
        rebuild_id = f"{kind.value}-{uuid.uuid4().hex[:12]}"
        request = RebuildRequest(rebuild_id, kind, snapshot.snapshot_id, table, speed or ReplaySpeed.full(),
                                 skip_meta_check)
        await self._record(request, targets)
        answers = await command_answers(self._store, [(t, _COMMANDS[kind], request.to_args()) for t in targets],
                                        self.command_timeout, f"{kind.value} {rebuild_id} stays queued and runs when "
                                        f"the instance reads it; GetReplayStatus({rebuild_id!r}) shows what happens")
        accepted = all(r.status is CommandStatus.SUCCEEDED for _, r in answers)
        warnings = tuple(dict.fromkeys(w for _, r in answers for w in r.details.get("warnings") or ()))
        what = f"{kind.value} {rebuild_id} of {table} from snapshot {snapshot.snapshot_id}"
        message = (f"{what} started on {', '.join(targets)}; GetReplayStatus({rebuild_id!r}) shows its progress"
                   if accepted else f"{what}: {answer_lines(answers)}")
        return Started(rebuild_id, accepted, message, warnings)

    async def status(self, rebuild_id: str) -> RebuildStatus:
        """The rebuild's state over its instances; NotFound when no record and no instance knows the id."""
        if not rebuild_id.strip():
            raise InvalidRequest("replay_id is required: StartReplay (or RestoreSnapshot's message) gives it")
        record = await self._store.command_result(rebuild_id, 0)
        reports = await Reports.read(self._store)
        live = {f"{i.service}:{i.instance_id}": i for i in reports.instances}
        running = {name: RebuildReport.from_json(rebuild_id, i.status["replays"][rebuild_id])
                   for name, i in live.items() if mapping_in(i.status, "replays").get(rebuild_id)}
        asked = list(record.details.get("instances") or ()) if record is not None else list(running)
        if not asked:
            raise NotFound(f"replay {rebuild_id!r} not found: no record of it (records are kept for an hour) and no "
                           "instance reports it")
        found = {name: running.get(name) or await self._outcome(rebuild_id, name, name in live) for name in asked}
        started_ms = int(record.details.get("started_unix_ms", 0)) if record is not None else 0
        return _combined(rebuild_id, found, started_ms)

    async def stop(self, rebuild_id: str) -> bool:
        """Stop the rebuild where it runs; True when it is stopped (now or before)."""
        status = await self.status(rebuild_id)
        if status.state is not RebuildState.RUNNING:
            return status.state is RebuildState.STOPPED
        answers = await command_answers(
            self._store, [(name, CommandKind.STOP_REPLAY, {"rebuild_id": rebuild_id})
                          for name, report in status.instances.items() if report.state is RebuildState.RUNNING],
            self.command_timeout, f"GetReplayStatus({rebuild_id!r}) shows whether {rebuild_id} stopped")
        return any(r.details.get("state") == RebuildState.STOPPED.value for _, r in answers)

    async def _record(self, request: RebuildRequest, targets: list[str]) -> None:
        details = {"instances": targets, "kind": request.kind.value, "table": str(request.table),
                   "snapshot_id": request.snapshot_id, "started_unix_ms": now_unix_ms()}
        record = CommandResult(request.rebuild_id, CommandStatus.SUCCEEDED, f"{request.kind.value} of {request.table}",
                               details, executed_by="oam")
        await self._store.complete_command(Command(request.rebuild_id, "oam", _COMMANDS[request.kind]), record)

    async def _outcome(self, rebuild_id: str, name: str, alive: bool) -> RebuildReport:
        service, _, instance_id = name.partition(":")
        result = await self._store.command_result(outcome_id(rebuild_id, service, instance_id), 0)
        if result is not None:
            return RebuildReport.from_json(rebuild_id, result.details)
        # Alive but not reporting it yet (its next heartbeat will), or gone without an outcome.
        state = RebuildState.RUNNING if alive else RebuildState.ERROR
        message = "" if alive else f"{name} stopped reporting before the rebuild ended"
        return RebuildReport(rebuild_id, RebuildKind.REPLAY, TableId("", ""), "", state, RebuildPhase.WAITING, 0, 0, 0,
                             message=message)

    def _pipeline(self, pipeline_id: str) -> PipelineKey:
        key = self._catalog.require_pipeline(pipeline_id)
        if TARGET_SERVICES.get(key.target_type) not in REBUILD_SERVICES:
            raise InvalidRequest(f"pipeline {pipeline_id!r}: replays run on replication-fanout and indexed-memory "
                                 f"targets, not {key.target_type}")
        return key


def _combined(rebuild_id: str, found: Mapping[str, RebuildReport], started_ms: int) -> RebuildStatus:
    states = {r.state for r in found.values()}
    state = next((s for s in (RebuildState.ERROR, RebuildState.RUNNING, RebuildState.STOPPED) if s in states),
                 RebuildState.COMPLETED)
    starts = [r.started_unix_ms for r in found.values() if r.started_unix_ms] or [started_ms or now_unix_ms()]
    ends = [r.finished_unix_ms for r in found.values()]
    end = max(ends) if state is not RebuildState.RUNNING and all(ends) else now_unix_ms()
    return RebuildStatus(rebuild_id, state, min(r.rows_replayed for r in found.values()),
                         max(0.0, (end - min(starts)) / 1000), dict(found))

"""The rebuilds of one fan-out or query instance: started and stopped by OAM's commands, reported in heartbeats.

A rebuild is answered as soon as it has started (snapshot found, columns checked), then runs in a task of its
own. When it ends, its final report is also stored in the coordination store (records.outcome_id) so OAM can
tell how it ended after the instance forgot it. A known rebuild id is not started again (commands are
redelivered).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from laredo_kernel.changes import TableId
from laredo_core.coordination.ports import (Command, CommandKind, CommandResult, CommandStatus, CoordinationStore,
                                            CoordinationUnavailable)
from laredo_kernel.position import PositionError
from laredo_core.rebuild.gate import GatedSink
from laredo_core.rebuild.meta import column_differences
from laredo_core.runtime import cancel
from laredo_core.rebuild.records import (RebuildKind, RebuildPhase, RebuildReport, RebuildRequest, RebuildState,
                                         outcome_id)
from laredo_core.rebuild.runner import Rebuild, RebuildFailed, RebuildLimits, RebuildTarget
from laredo_core.rebuild.snapshot_rows import read_verified_rows
from laredo_core.rebuild.tail import StreamTail, TailUnavailable
from laredo_core.snapshots.errors import SnapshotError
from laredo_core.snapshots.store import SnapshotStore

log = logging.getLogger(__name__)

SnapshotStoreFor = Callable[[TableId], SnapshotStore | None]
_KINDS = {CommandKind.RESTORE: RebuildKind.RESTORE, CommandKind.REPLAY: RebuildKind.REPLAY}
_OUTCOME_STATUS = {RebuildState.COMPLETED: CommandStatus.SUCCEEDED, RebuildState.STOPPED: CommandStatus.SUCCEEDED,
                   RebuildState.ERROR: CommandStatus.FAILED}
STOP_WAIT = 5.0  # seconds a STOP_REPLAY waits for the rebuild to end before answering
OUTCOME_TIMEOUT = 5.0


@dataclass
class _Entry:
    request: RebuildRequest
    rebuild: Rebuild
    started_unix_ms: int
    warnings: tuple[str, ...] = ()
    state: RebuildState = RebuildState.RUNNING
    message: str = ""
    finished_unix_ms: int = 0
    task: asyncio.Task[None] | None = field(default=None, repr=False)

    def report(self) -> RebuildReport:
        progress, request = self.rebuild.progress, self.request
        return RebuildReport(request.rebuild_id, request.kind, request.table, request.snapshot_id, self.state,
                             progress.phase, progress.rows_replayed, progress.changes, self.started_unix_ms,
                             self.finished_unix_ms, request.speed.text, self.message, self.warnings)


class InstanceRebuilds:
    """See the module docstring. `stores(table)` is the snapshot store the instance reads the table's
    snapshots from (None: it has none); `on_change` is called whenever a rebuild starts or ends (a heartbeat
    poke, so OAM sees it at once)."""

    def __init__(self, service: str, instance_id: str, targets: Mapping[TableId, RebuildTarget],
                 stores: SnapshotStoreFor, tail: StreamTail, gate: GatedSink, *,
                 coordination: CoordinationStore | None = None, limits: RebuildLimits | None = None,
                 clock: Callable[[], float] = time.time, keep_finished: int = 16, keep_for: float = 3600.0) -> None:
        self.service = service
        self.instance_id = instance_id
        self.on_change: Callable[[], None] = lambda: None
        self._targets = targets
        self._stores = stores
        self._tail = tail
        self._gate = gate
        self._coordination = coordination
        self._limits = limits or RebuildLimits()
        self._clock = clock
        self._keep_finished = keep_finished
        self._keep_for = keep_for
        self._entries: dict[str, _Entry] = {}

    async def execute(self, command: Command) -> CommandResult | None:
        """The result of a RESTORE, REPLAY or STOP_REPLAY command; None for any other kind."""
        if command.kind in _KINDS:
            try:
                status, message, details = await self._start(RebuildRequest.from_args(_KINDS[command.kind],
                                                                                       command.args))
            except ValueError as exc:
                status, message, details = CommandStatus.FAILED, str(exc), {}
        elif command.kind is CommandKind.STOP_REPLAY:
            status, message, details = await self._stop(str(command.args.get("rebuild_id") or ""))
        else:
            return None
        return CommandResult(command.command_id, status, message, details, executed_by=self.instance_id,
                             finished_unix_ms=self._now_ms())

    def report(self) -> dict[str, Any]:
        """Every running rebuild and the recently finished ones, by id: what the heartbeat carries."""
        self._forget_old()
        return {rebuild_id: entry.report().to_json() for rebuild_id, entry in self._entries.items()}

    def running(self, table: TableId) -> str | None:
        return next((i for i, e in self._entries.items() if e.request.table == table and not e.state.finished), None)

    async def aclose(self) -> None:
        """Stop every running rebuild (service shutdown); an install in progress finishes first."""
        await cancel(e.task for e in self._entries.values())
        await self._tail.aclose()

    async def _start(self, request: RebuildRequest) -> tuple[CommandStatus, str, dict[str, Any]]:
        what = f"{request.kind.value} {request.rebuild_id} of {request.table} from snapshot {request.snapshot_id}"
        known = self._entries.get(request.rebuild_id)
        if known is not None:
            return CommandStatus.SUCCEEDED, f"{what}: started before", self._details(known)
        target = self._targets.get(request.table)
        if target is None:
            return CommandStatus.REJECTED, f"this {self.service} instance does not serve {request.table}", {}
        running = self.running(request.table)
        if running is not None:
            return CommandStatus.FAILED, (f"{request.table} is being rebuilt already ({running}); stop that with "
                                          "StopReplay or wait until it ends"), {}
        store = self._stores(request.table)
        if store is None:
            return CommandStatus.FAILED, (f"no snapshot store is configured for {request.table} on this "
                                          f"{self.service} instance; configure snapshot {{ store = ... }} on the "
                                          "table's replication-fanout target"), {}
        try:
            manifest = await store.read_manifest(request.table, request.snapshot_id)
        except SnapshotError as exc:
            return CommandStatus.FAILED, f"{what}: cannot read the snapshot ({exc})", {}
        if manifest is None:
            return CommandStatus.FAILED, (f"{what}: this {self.service} instance's snapshot store has no such "
                                          "snapshot of the table"), {}
        columns, key = target.columns()
        differences = column_differences(manifest.columns, manifest.key_columns, columns, key)
        if differences and not request.skip_meta_check:
            return CommandStatus.FAILED, (f"{what} refused: the snapshot does not fit the table ("
                                          f"{'; '.join(differences)}); restore with skip_meta_check=true to install "
                                          "it anyway"), {"differences": differences}
        rebuild = Rebuild(request.rebuild_id, target, manifest, tail=self._tail, gate=self._gate,
                          speed=request.speed, limits=self._limits)
        entry = _Entry(request, rebuild, self._now_ms(), tuple(differences))
        entry.task = asyncio.create_task(self._run(entry, store), name=f"rebuild:{request.rebuild_id}")
        self._entries[request.rebuild_id] = entry
        log.info("%s started (speed %s)%s", what, request.speed.text,
                 f"; differences ignored: {'; '.join(differences)}" if differences else "")
        self.on_change()
        return CommandStatus.SUCCEEDED, f"{what} started", self._details(entry)

    async def _run(self, entry: _Entry, store: SnapshotStore) -> None:
        rebuild = entry.rebuild
        try:
            rows = await read_verified_rows(store, rebuild.manifest)
            await rebuild.run(rows)
            skipped = rebuild.progress.skipped
            self._finish(entry, RebuildState.COMPLETED, f"installed: {rebuild.progress.changes} rows differed from "
                         "the live table" + (f"; {skipped} rows could not be installed (see the instance's log)"
                                             if skipped else ""))
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            installed = rebuild.progress.phase in (RebuildPhase.INSTALLING, RebuildPhase.DONE)
            self._finish(entry, RebuildState.STOPPED, "stopped after the install finished" if installed
                         else "stopped before the install; the live table is unchanged")
        except (RebuildFailed, TailUnavailable, SnapshotError, PositionError) as exc:
            self._finish(entry, RebuildState.ERROR, str(exc))
        except Exception as exc:  # noqa: BLE001 - a rebuild's bug must not take the instance down
            log.exception("rebuild %s failed unexpectedly", entry.request.rebuild_id)
            self._finish(entry, RebuildState.ERROR, f"failed unexpectedly: {type(exc).__name__}: {exc}")
        await self._store_outcome(entry)

    def _finish(self, entry: _Entry, state: RebuildState, message: str) -> None:
        entry.state, entry.message, entry.finished_unix_ms = state, message, self._now_ms()
        level = logging.WARNING if state is RebuildState.ERROR else logging.INFO
        log.log(level, "%s %s of %s: %s (%s)", entry.request.kind.value, entry.request.rebuild_id,
                entry.request.table, state.value, message)
        self.on_change()

    async def _stop(self, rebuild_id: str) -> tuple[CommandStatus, str, dict[str, Any]]:
        entry = self._entries.get(rebuild_id)
        if entry is None:
            return CommandStatus.REJECTED, f"this {self.service} instance runs no rebuild {rebuild_id!r}", {}
        task = entry.task
        if entry.state.finished or task is None:
            return CommandStatus.SUCCEEDED, f"{rebuild_id} had already ended ({entry.state.value})", self._details(entry)
        if entry.rebuild.progress.phase in (RebuildPhase.INSTALLING, RebuildPhase.DONE):
            return CommandStatus.SUCCEEDED, (f"{rebuild_id} is installing and cannot be stopped any more; it ends "
                                             "in moments"), self._details(entry)
        task.cancel()
        await asyncio.wait({task}, timeout=STOP_WAIT)
        return CommandStatus.SUCCEEDED, f"{rebuild_id}: {entry.state.value}", self._details(entry)

    async def _store_outcome(self, entry: _Entry) -> None:
        if self._coordination is None:
            return
        record = outcome_id(entry.request.rebuild_id, self.service, self.instance_id)
        report = entry.report()
        kind = CommandKind.RESTORE if entry.request.kind is RebuildKind.RESTORE else CommandKind.REPLAY
        result = CommandResult(record, _OUTCOME_STATUS[entry.state], entry.message, report.to_json(),
                               executed_by=self.instance_id, finished_unix_ms=entry.finished_unix_ms)
        try:
            async with asyncio.timeout(OUTCOME_TIMEOUT):
                await self._coordination.complete_command(
                    Command(record, f"{self.service}:{self.instance_id}", kind), result)
        except (CoordinationUnavailable, TimeoutError) as exc:
            log.info("outcome of rebuild %s not stored (%s); heartbeats report it for %gs", entry.request.rebuild_id,
                     exc, self._keep_for)

    def _details(self, entry: _Entry) -> dict[str, Any]:
        return {"rebuild_id": entry.request.rebuild_id, "state": entry.state.value,
                "warnings": list(entry.warnings)}

    def _forget_old(self) -> None:
        finished = sorted((e for e in self._entries.values() if e.state.finished),
                          key=lambda e: e.finished_unix_ms, reverse=True)
        oldest_kept = self._now_ms() - int(self._keep_for * 1000)
        for index, entry in enumerate(finished):
            if index >= self._keep_finished or entry.finished_unix_ms < oldest_kept:
                del self._entries[entry.request.rebuild_id]

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

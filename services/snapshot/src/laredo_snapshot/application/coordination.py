"""This instance in the coordination store: a status heartbeat (service `snapshot`) and SNAPSHOT commands.

Commands addressed to `snapshot:*` go to exactly one snapshot instance (one consumer group for all of them:
a compaction is work to do once, not a broadcast); `snapshot:<instance_id>` to this one. Arguments as OAM's
CreateSnapshot sends them to fan-out: `tables` (["schema.table", ...], empty = all) and `user_meta` (stored
in the manifests). The result's details: `snapshots` {table: snapshot id} and `failed` {table: why}.
Re-running a command is harmless: it compacts again (nothing new: no snapshot). Coordination never stops
compactions: an unreachable store only delays commands and heartbeats.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from typing import Any

from laredo_core.coordination.heartbeat import InstanceHeartbeat
from laredo_core.coordination.ports import (
    Command,
    CommandKind,
    CommandResult,
    CommandStatus,
    CoordinationStore,
    CoordinationUnavailable,
)
from laredo_core.errors import LaredoError

from laredo_snapshot.application.service import SnapshotService

log = logging.getLogger(__name__)

SERVICE = "snapshot"
SHARED_TARGET = "snapshot:*"


class SnapshotCoordinator:
    def __init__(self, store: CoordinationStore, instance_id: str, service: SnapshotService, *,
                 heartbeat_interval: float = 5.0) -> None:
        self._store = store
        self.instance_id = instance_id
        self._service = service
        self.heartbeat = InstanceHeartbeat(store, SERVICE, instance_id, service.status,
                                           interval=heartbeat_interval, ttl=3 * heartbeat_interval)
        self.joined = {target: asyncio.Event() for target in self.command_targets}

    @property
    def command_targets(self) -> tuple[str, str]:
        return SHARED_TARGET, f"{SERVICE}:{self.instance_id}"

    async def run(self) -> None:
        """Heartbeat and command loops until cancelled; on cancellation the instance deregisters."""
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self.heartbeat.run())
                for target in self.command_targets:
                    group.create_task(self._serve(target))
        finally:
            await asyncio.shield(self.heartbeat.deregister())

    async def _serve(self, target: str) -> None:
        subscription = self._store.commands(target, self.instance_id)
        try:
            with contextlib.suppress(CoordinationUnavailable):  # iteration keeps trying during an outage
                await subscription.join()
                self.joined[target].set()
            async for command in subscription:
                self.joined[target].set()
                result = await self.execute(command)
                try:
                    await self._store.complete_command(command, result)
                except CoordinationUnavailable as exc:
                    log.warning("result of command %s not stored (%s); it is redelivered and re-run",
                                command.command_id, exc)
        finally:
            await subscription.aclose()

    async def execute(self, command: Command) -> CommandResult:
        log.info("command %s (%s) from %s: %s", command.command_id, command.kind.value, command.target,
                 dict(command.args))
        if command.kind is not CommandKind.SNAPSHOT:
            status, message, details = (CommandStatus.REJECTED, f"the snapshot service does not execute "
                                        f"{command.kind.value}; it executes snapshot", {})
        else:
            try:
                status, message, details = await self._snapshot(command.args)
            except (LaredoError, ValueError, TypeError) as exc:
                status, message, details = CommandStatus.REJECTED, str(exc), {}
        return CommandResult(command.command_id, status, message, details, executed_by=self.instance_id,
                             finished_unix_ms=int(time.time() * 1000))

    async def _snapshot(self, args: Mapping[str, Any]) -> tuple[CommandStatus, str, dict[str, Any]]:
        tables = self._service.resolve([str(t) for t in args.get("tables") or ()])
        user_meta = args.get("user_meta") or {}
        if not isinstance(user_meta, Mapping):
            raise ValueError(f"user_meta must be a JSON object, got {type(user_meta).__name__}")
        runs = await self._service.run_pass(tables, user_meta)
        written = {str(r.table): r.snapshot_id for r in runs if r.snapshot_id}
        failed = {str(r.table): r.error or (r.outcome.reason if r.outcome is not None else "")
                  for r in runs if not r.snapshot_id}
        lines = [f"{t}: snapshot {i}" for t, i in written.items()] + [f"{t}: no snapshot ({w})" for t, w in
                                                                          failed.items()]
        status = CommandStatus.SUCCEEDED if not any(r.error for r in runs) else CommandStatus.FAILED
        return status, "; ".join(lines), {"snapshots": written, "failed": failed}

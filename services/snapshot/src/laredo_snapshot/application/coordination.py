"""This instance in the coordination store: a status heartbeat (service `snapshot`) and SNAPSHOT commands.

Commands addressed to `snapshot:*` go to exactly one snapshot instance (one consumer group for all of them:
a compaction is work to do once, not a broadcast); `snapshot:<instance_id>` to this one.
laredo_core.coordination.instance serves them and hands each to this module. Arguments as OAM's
CreateSnapshot sends them to fan-out: `tables` (["schema.table", ...], empty = all) and `user_meta` (stored
in the manifests). The result's details: `snapshots` {table: snapshot id} and `failed` {table: why}.
Re-running a command is harmless: it compacts again (nothing new: no snapshot). Coordination never stops
compactions: an unreachable store only delays commands and heartbeats.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from laredo_core.coordination.instance import CommandAnswer, InstanceCoordinator, SharedTarget
from laredo_core.coordination.ports import Command, CommandKind, CommandStatus, CoordinationStore
from laredo_kernel.errors import LaredoError

from laredo_snapshot.application.service import SnapshotService

SERVICE = "snapshot"


class SnapshotCoordinator:
    def __init__(self, store: CoordinationStore, instance_id: str, service: SnapshotService, *,
                 heartbeat_interval: float = 5.0) -> None:
        self._service = service
        self.instance = InstanceCoordinator(store, SERVICE, instance_id, service.status, self._carry_out,
                                            heartbeat_interval=heartbeat_interval, shared=SharedTarget.ONE_INSTANCE)
        self.joined = self.instance.joined  # set once commands are read

    async def run(self) -> None:
        """Heartbeat and command loops until cancelled; on cancellation the instance deregisters."""
        await self.instance.run()

    async def _carry_out(self, command: Command) -> CommandAnswer:
        if command.kind is not CommandKind.SNAPSHOT:
            return (CommandStatus.REJECTED, f"the snapshot service does not execute {command.kind.value}; "
                    "it executes snapshot", {})
        try:
            return await self._snapshot(command.args)
        except (LaredoError, ValueError, TypeError) as exc:
            return CommandStatus.REJECTED, str(exc), {}

    async def _snapshot(self, args: Mapping[str, Any]) -> tuple[CommandStatus, str, dict[str, Any]]:
        tables = self._service.resolve([str(t) for t in args.get("tables") or ()])
        user_meta = args.get("user_meta") or {}
        if not isinstance(user_meta, Mapping):
            raise ValueError(f"user_meta must be a JSON object, got {type(user_meta).__name__}")
        runs = await self._service.run_pass(tables, user_meta)
        written = {str(r.table): r.snapshot_id for r in runs if r.snapshot_id}
        failed = {str(r.table): r.error or r.reason for r in runs if not r.snapshot_id}
        lines = [f"{t}: snapshot {i}" for t, i in written.items()] + [f"{t}: no snapshot ({w})" for t, w in
                                                                          failed.items()]
        status = CommandStatus.SUCCEEDED if not any(r.error for r in runs) else CommandStatus.FAILED
        return status, "; ".join(lines), {"snapshots": written, "failed": failed}

"""This instance in the coordination store: a status heartbeat, and the operators' commands (drain, snapshot).

laredo_core.coordination.instance serves the commands for 'fanout:*' and 'fanout:<instance_id>' (idempotent by
command id, each result stored for the sender), runs restores and replays, and hands every other kind here. A
drain runs only when sent to this instance's own target: one sent to all would leave the clients of every
instance nowhere to go. An unreachable store only delays commands and heartbeats, never the data path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from laredo_core.coordination.instance import CommandAnswer, InstanceCoordinator
from laredo_core.coordination.ports import Command, CommandKind, CommandResult, CommandStatus, CoordinationStore
from laredo_core.coordination.status_reports import column_report
from laredo_core.rebuild.instance import InstanceRebuilds

from laredo_fanout.application.dead_letter_replay import FanoutDeadLetterReplay
from laredo_fanout.application.table_replica import TableReplica
from laredo_fanout.application.targets import FanoutTargets
from laredo_fanout.domain.errors import FanoutError, SnapshotStoreUnavailable
from laredo_fanout.ports import Clock

SERVICE = "fanout"
REPORTED_CLIENTS = 100  # clients per table in a status report, the furthest behind first


class FanoutCoordinator:
    def __init__(self, store: CoordinationStore, instance_id: str, targets: FanoutTargets, clock: Clock, *,
                 heartbeat_interval: float = 5.0, rebuilds: InstanceRebuilds | None = None,
                 dead_letter_replay: FanoutDeadLetterReplay | None = None) -> None:
        self._dead_letter_replay = dead_letter_replay  # REPLAY_DEAD_LETTERS; None: dead letters are off
        self._targets = targets
        self._clock = clock
        self.instance = InstanceCoordinator(store, SERVICE, instance_id, self._own_status, self._carry_out,
                                            heartbeat_interval=heartbeat_interval, rebuilds=rebuilds)
        self.joined = self.instance.joined  # set once commands are read

    async def run(self) -> None:
        """Heartbeat and command loops until cancelled; on cancellation the instance deregisters."""
        await self.instance.run(self._report_when_ready)

    async def _report_when_ready(self) -> None:
        """Poke the heartbeat as each table becomes ready (baseline complete, caught up): OAM sees it at once."""
        waits = [asyncio.ensure_future(replica.wait_ready()) for replica in self._targets.replicas]
        try:
            for ready in asyncio.as_completed(waits):
                await ready
                self.instance.heartbeat.poke()
        finally:
            for wait in waits:
                wait.cancel()

    async def execute(self, command: Command) -> CommandResult:
        """Run one command (again, harmlessly, if it was already run: drains and snapshots are idempotent)."""
        return await self.instance.execute(command)

    async def _carry_out(self, command: Command) -> CommandAnswer:
        try:
            if command.kind is CommandKind.DRAIN:
                return self._drain(command)
            if command.kind is CommandKind.SNAPSHOT:
                return await self._snapshot(command.args)
            if command.kind is CommandKind.REPLAY_DEAD_LETTERS and self._dead_letter_replay is not None:
                return self._dead_letter_replay.execute(command.args)
        except (FanoutError, ValueError, TypeError) as exc:
            return CommandStatus.FAILED, str(exc), {}
        return (CommandStatus.REJECTED, f"fan-out does not execute {command.kind.value}; it executes drain, "
                "snapshot, restore, replay and stop_replay", {})

    def _drain(self, command: Command) -> tuple[CommandStatus, str, dict[str, Any]]:
        """Drain this instance, only when sent to its own target (`fanout:<instance_id>`, whose args may name
        it too): a drain sent to all (`fanout:*`) or naming another instance is rejected. OAM decides which
        instance may drain, keeping one ready per table."""
        args, own = command.args, self.instance.instance_id
        named = str(args.get("instance_id") or "")
        if named and named != own:
            return CommandStatus.REJECTED, f"drain addressed to fan-out instance {named}, not to {own}", {}
        if command.target != f"{SERVICE}:{own}":
            return (CommandStatus.REJECTED, f"a drain names its instance: send it to {SERVICE}:<instance_id> "
                    f"(this is {own}) or use OAM DrainReplication, which checks another instance stays ready", {})
        deadline = _deadline(args, self._clock.now())
        tables = self._targets.drain(str(args.get("schema") or ""), str(args.get("table") or ""), "admin", deadline)
        names = [str(t) for t in tables]
        self.instance.heartbeat.poke()
        return CommandStatus.SUCCEEDED, f"draining {', '.join(names)}", {
            "tables": names, "drain_deadline_unix_ms": int(deadline * 1000)}

    async def _snapshot(self, args: Mapping[str, Any]) -> tuple[CommandStatus, str, dict[str, Any]]:
        """A new snapshot of each named table (all with a store when none is named), even if unchanged. Details:
        `snapshots` {table: snapshot id written}, `failed` {table: why not}, `missing` [tables named that this
        instance does not snapshot]."""
        wanted = {str(t) for t in args.get("tables") or ()}
        user_meta = args.get("user_meta") or {}
        if not isinstance(user_meta, Mapping):
            raise ValueError(f"user_meta must be a JSON object, got {type(user_meta).__name__}")
        taken: dict[str, str] = {}
        failed: dict[str, str] = {}
        for table, snapshots in self._targets.snapshots.items():
            if wanted and str(table) not in wanted:
                continue
            try:
                manifest = await snapshots.take(user_meta=user_meta, force=True)
            except SnapshotStoreUnavailable as exc:
                failed[str(table)] = f"snapshot store failed: {exc}"
                continue
            if manifest is None:
                failed[str(table)] = snapshots.unavailable_reason() or "no snapshot taken"
            else:
                taken[str(table)] = manifest.snapshot_id
        missing = sorted(wanted - {str(t) for t in self._targets.snapshots})
        details = {"snapshots": taken, "failed": failed, "missing": missing}
        if not taken and not failed:
            return (CommandStatus.REJECTED, "no matching table with a snapshot store on this instance"
                    + (f" (asked for {', '.join(missing)})" if missing else ""), details)
        message = "; ".join([f"{t}: snapshot {i}" for t, i in taken.items()]
                            + [f"{t}: {why}" for t, why in failed.items()]
                            + [f"{t}: no snapshot store on this instance" for t in missing])
        return (CommandStatus.FAILED if failed or missing else CommandStatus.SUCCEEDED), message, details

    def _own_status(self) -> Mapping[str, Any]:
        ready, details = self._targets.readiness()
        for replica in self._targets.replicas:  # the columns OAM's GetTableSchema answers with
            entry = details["tables"][str(replica.table)]
            entry["columns"], entry["client_list"] = column_report(replica.columns), _clients(replica)
        return {"ready": ready, "draining": self._targets.draining, **details}


def _clients(replica: TableReplica) -> list[dict[str, Any]]:
    """The clients furthest behind first, at most REPORTED_CLIENTS of them (the console's list)."""
    current = replica.journal.current_sequence
    clients = sorted(((c.lag(current), c) for c in replica.clients.clients()), key=lambda pair: -pair[0])
    return [{"client_id": c.client_id, "sequence": c.sequence, "behind": behind, "state": c.state.value,
             "buffer": c.buffer_depth, "connected_unix_ms": int(c.connected_at * 1000)}
            for behind, c in clients[:REPORTED_CLIENTS]]


def _deadline(args: Mapping[str, Any], now: float) -> float:
    """Unix seconds from deadline_unix_ms or drain_deadline_seconds (0 = none)."""
    if args.get("deadline_unix_ms"):
        return int(args["deadline_unix_ms"]) / 1000
    if args.get("drain_deadline_seconds"):
        return now + float(args["drain_deadline_seconds"])
    return 0.0

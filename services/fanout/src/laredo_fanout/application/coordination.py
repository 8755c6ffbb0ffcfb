"""This instance in the coordination store: a status heartbeat, and the operators' commands (drain, snapshot).

Commands arrive for 'fanout:*' (every instance, each reading with its own group) and for
'fanout:<instance_id>'. Executing one is idempotent by command id; its result is stored for the sender.
Coordination never stops the data path: an unreachable store only delays commands and heartbeats.
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

from laredo_fanout.application.targets import FanoutTargets
from laredo_fanout.domain.errors import FanoutError
from laredo_fanout.ports import Clock

log = logging.getLogger(__name__)

SERVICE = "fanout"
BROADCAST_TARGET = "fanout:*"


class FanoutCoordinator:
    def __init__(self, store: CoordinationStore, instance_id: str, targets: FanoutTargets, clock: Clock, *,
                 heartbeat_interval: float = 5.0) -> None:
        self._store = store
        self._instance_id = instance_id
        self._targets = targets
        self._clock = clock
        self.joined = {target: asyncio.Event() for target in self.command_targets}  # set once commands are read
        self.heartbeat = InstanceHeartbeat(store, SERVICE, instance_id, self.status,
                                           interval=heartbeat_interval, ttl=3 * heartbeat_interval)

    @property
    def command_targets(self) -> tuple[str, str]:
        return BROADCAST_TARGET, f"{SERVICE}:{self._instance_id}"

    async def run(self) -> None:
        """Heartbeat and command loops until cancelled; on cancellation the instance deregisters."""
        broadcast, own = self.command_targets
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self.heartbeat.run())
                group.create_task(self._serve(broadcast, group_name=f"{broadcast}:{self._instance_id}"))
                group.create_task(self._serve(own, group_name=None))
        finally:
            await asyncio.shield(self.heartbeat.deregister())

    async def _serve(self, target: str, group_name: str | None) -> None:
        subscription = self._store.commands(target, self._instance_id, group=group_name)
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
                    log.warning("result of command %s not stored (%s); it is redelivered and re-run", command.command_id,
                                exc)
        finally:
            await subscription.aclose()

    async def execute(self, command: Command) -> CommandResult:
        """Run one command (again, harmlessly, if it was already run: drains and snapshots are idempotent)."""
        log.info("command %s (%s) from %s: %s", command.command_id, command.kind.value, command.target,
                 dict(command.args))
        try:
            if command.kind is CommandKind.DRAIN:
                status, message, details = self._drain(command.args)
            elif command.kind is CommandKind.SNAPSHOT:
                status, message, details = await self._snapshot(command.args)
            else:
                status, message, details = (CommandStatus.REJECTED, f"fan-out does not execute {command.kind.value}; "
                                            "it executes drain and snapshot", {})
        except (FanoutError, ValueError, TypeError) as exc:
            status, message, details = CommandStatus.FAILED, str(exc), {}
        return CommandResult(command.command_id, status, message, details, executed_by=self._instance_id,
                             finished_unix_ms=int(time.time() * 1000))

    def _drain(self, args: Mapping[str, Any]) -> tuple[CommandStatus, str, dict[str, Any]]:
        deadline = _deadline(args, self._clock.now())
        tables = self._targets.drain(str(args.get("schema") or ""), str(args.get("table") or ""), "admin", deadline)
        names = [str(t) for t in tables]
        return CommandStatus.SUCCEEDED, f"draining {', '.join(names)}", {
            "tables": names, "drain_deadline_unix_ms": int(deadline * 1000)}

    async def _snapshot(self, args: Mapping[str, Any]) -> tuple[CommandStatus, str, dict[str, Any]]:
        wanted = {str(t) for t in args.get("tables") or ()}
        taken = {}
        for table, snapshots in self._targets.snapshots.items():
            if not wanted or str(table) in wanted:
                manifest = await snapshots.take()
                taken[str(table)] = manifest.snapshot_id if manifest is not None else ""
        if not taken:
            return CommandStatus.REJECTED, "no matching table with a snapshot store on this instance", {}
        return CommandStatus.SUCCEEDED, f"snapshots of {', '.join(taken)}", {"snapshots": taken}

    def status(self) -> Mapping[str, Any]:
        ready, details = self._targets.readiness()
        return {"ready": ready, "draining": self._targets.draining, **details}


def _deadline(args: Mapping[str, Any], now: float) -> float:
    """Unix seconds from deadline_unix_ms or drain_deadline_seconds (0 = none)."""
    if args.get("deadline_unix_ms"):
        return int(args["deadline_unix_ms"]) / 1000
    if args.get("drain_deadline_seconds"):
        return now + float(args["drain_deadline_seconds"])
    return 0.0

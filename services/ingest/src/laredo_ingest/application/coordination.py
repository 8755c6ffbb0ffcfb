"""One active reader per source, operator commands and status heartbeats, through the CoordinationStore.

Leases, fencing, commands and the heartbeat are described in the README ("Coordination"); a redelivered
command id gets the stored result again (idempotent by command id).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from laredo_kernel.changes import TableId
from laredo_core.coordination.heartbeat import InstanceHeartbeat, LeaderLease
from laredo_core.coordination.ports import (
    Command,
    CommandKind,
    CommandResult,
    CommandStatus,
    CoordinationStore,
    CoordinationUnavailable,
)
from laredo_core.runtime import cancel
from laredo_kernel.errors import LaredoError

from laredo_ingest.application.control import IngestControl
from laredo_ingest.application.status import IngestPhase, IngestStatus
from laredo_ingest.domain.errors import IngestError

log = logging.getLogger(__name__)

RunService = Callable[[asyncio.Event], Awaitable[None]]
REMEMBERED_RESULTS = 256


@dataclass(frozen=True, slots=True)
class CoordinationSettings:
    leader_election: bool = False
    commands: bool = False
    heartbeats: bool = False
    lease_ttl: float = 10.0
    lease_renew_every: float = 3.0
    heartbeat_interval: float = 5.0
    hold_lease_through_outage: bool = False  # the work is fenced elsewhere (see LeaderLease)

    @property
    def enabled(self) -> bool:
        return self.leader_election or self.commands or self.heartbeats


class IngestCoordinator:
    def __init__(self, store: CoordinationStore, settings: CoordinationSettings, *, source_id: str,
                 instance_id: str, status: IngestStatus, control: IngestControl) -> None:
        self._store = store
        self._settings = settings
        self._source_id = source_id
        self._instance_id = instance_id
        self._status = status
        self._control = control
        self.target = f"ingest:{source_id}"
        self._results: OrderedDict[str, CommandResult] = OrderedDict()

    async def run(self, stop: asyncio.Event, run_service: RunService) -> None:
        """Heartbeat all along; the service runs while this instance leads (or always, without election)."""
        s = self._settings
        heartbeat = InstanceHeartbeat(self._store, "ingest", self._instance_id, self._heartbeat_status,
                                      interval=s.heartbeat_interval, ttl=3 * s.heartbeat_interval)
        beating = asyncio.create_task(heartbeat.run(), name="ingest-heartbeat") if s.heartbeats else None
        if beating is not None:
            self._status.on_change = heartbeat.poke
        try:
            if s.leader_election:
                await self._lead_when_elected(stop, run_service)
            else:
                await self._with_commands(stop, run_service)
        finally:
            if beating is not None:
                self._status.on_change = None
                await cancel([beating])
                await heartbeat.deregister()

    async def _lead_when_elected(self, stop: asyncio.Event, run_service: RunService) -> None:
        s = self._settings
        lease = LeaderLease(self._store, self.target, self._instance_id, ttl=s.lease_ttl,
                            renew_every=s.lease_renew_every, hold_through_outage=s.hold_lease_through_outage)
        while not stop.is_set():
            self._status.is_leader, self._status.phase = False, IngestPhase.STANDBY
            self._status.changed()
            log.info("instance %s is standby for source %s: waiting for lease %s", self._instance_id,
                     self._source_id, self.target)
            if not await lease.acquire(stop):
                break
            self._status.is_leader = True
            self._status.changed()
            leader_stop = asyncio.Event()
            watch = asyncio.create_task(_set_when_any(leader_stop, stop, lease.lost), name="ingest-lease-watch")
            try:
                await self._with_commands(leader_stop, run_service)
            finally:
                await cancel([watch])
                self._status.is_leader = False
                self._control.abandon("this instance is no longer the leader")
                await lease.release()
            if lease.lost.is_set() and not stop.is_set():
                log.warning("instance %s stopped streaming source %s: the lease was lost", self._instance_id,
                            self._source_id)
        self._status.phase = IngestPhase.STOPPED
        self._status.changed()

    async def _with_commands(self, stop: asyncio.Event, run_service: RunService) -> None:
        consumer = (asyncio.create_task(self._consume_commands(), name="ingest-commands")
                    if self._settings.commands else None)
        try:
            await run_service(stop)
        finally:
            await cancel([consumer])

    async def _consume_commands(self) -> None:
        subscription = self._store.commands(self.target, self._instance_id)
        try:
            async for command in subscription:
                result = await self.execute(command)
                with contextlib.suppress(CoordinationUnavailable):  # redelivered later; answered from memory
                    await self._store.complete_command(command, result)
        finally:
            await subscription.aclose()

    async def execute(self, command: Command) -> CommandResult:
        """Carry out one command (or return the result it already had)."""
        known = self._results.get(command.command_id)
        if known is not None:
            return known
        log.info("command %s: %s %s", command.command_id, command.kind.value, dict(command.args))
        try:
            status, message = await self._carry_out(command)
        except LaredoError as exc:
            status, message = (CommandStatus.FAILED if exc.retryable else CommandStatus.REJECTED), str(exc)
        except Exception as exc:  # noqa: BLE001 - a bug in one command must not stop the others (or the data)
            log.exception("command %s (%s) failed unexpectedly", command.command_id, command.kind.value)
            status, message = CommandStatus.FAILED, f"{type(exc).__name__}: {exc}"
        result = CommandResult(command.command_id, status, message, executed_by=self._instance_id)
        self._results[command.command_id] = result
        while len(self._results) > REMEMBERED_RESULTS:
            self._results.popitem(last=False)
        return result

    async def _carry_out(self, command: Command) -> tuple[CommandStatus, str]:
        kind, args = command.kind, command.args
        if kind is CommandKind.RELOAD:
            return CommandStatus.SUCCEEDED, await self._control.reload(reload_tables(args))
        if kind is CommandKind.PAUSE:
            return CommandStatus.SUCCEEDED, await self._control.pause()
        if kind is CommandKind.RESUME:
            return CommandStatus.SUCCEEDED, await self._control.resume()
        if kind is CommandKind.RESET:
            return CommandStatus.SUCCEEDED, await self._control.reset(
                drop_publication=bool(args.get("drop_publication", False)))
        return CommandStatus.REJECTED, f"ingest does not carry out {kind.value} commands"

    def _heartbeat_status(self) -> dict[str, object]:
        return {"source": self._source_id, "ready": self._status.ready, **self._status.report()}


def reload_tables(args: Mapping[str, Any]) -> list[TableId]:
    """RELOAD arguments: schema + table, or tables = ["schema.table", ...]; none means every table."""
    if args.get("table"):
        return [TableId(str(args.get("schema") or "public"), str(args["table"]))]
    try:
        return [TableId.parse(str(t)) for t in args.get("tables") or ()]
    except ValueError as exc:
        raise IngestError(f"RELOAD: {exc}") from None


async def _set_when_any(target: asyncio.Event, *sources: asyncio.Event) -> None:
    waits = [asyncio.ensure_future(s.wait()) for s in sources]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        target.set()
    finally:
        for wait in waits:
            wait.cancel()

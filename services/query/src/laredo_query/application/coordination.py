"""This instance in the coordination store: a status heartbeat, and the commands addressed to query instances.

The status (service `query`) is {"ready", "tables": {"schema.table": {ready, baseline_complete, caught_up, rows,
position, columns, indexes, subscribers, ...}}}; OAM derives the indexed-memory pipelines' states from it and
answers GetTableSchema with `columns`. It is stored every `heartbeat_interval` and at once whenever a table's
readiness changes (InstanceHeartbeat.poke), so a status watcher sees BASELINING -> STREAMING when it happens.

Commands arrive for 'query:*' (every instance, each reading with its own group) and for 'query:<instance_id>';
`execute` answers each (kinds the query service does not carry out are REJECTED) and the result is stored for
the sender. Coordination never stops the data path: an unreachable store only delays heartbeats and commands.
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
from laredo_core.coordination.status_reports import column_report
from laredo_core.rebuild.instance import InstanceRebuilds

from laredo_query.application.dead_letter_replay import QueryDeadLetterReplay
from laredo_query.application.queries import QueryService
from laredo_query.application.query_table import ReadinessSignal

log = logging.getLogger(__name__)

SERVICE = "query"
BROADCAST_TARGET = "query:*"


class QueryCoordinator:
    """Heartbeat and command loops of one query instance; `run()` until cancelled, then it deregisters."""

    def __init__(self, store: CoordinationStore, instance_id: str, service: QueryService, signal: ReadinessSignal,
                 *, heartbeat_interval: float = 5.0, rebuilds: InstanceRebuilds | None = None,
                 dead_letter_replay: QueryDeadLetterReplay | None = None) -> None:
        self._store = store
        self._dead_letter_replay = dead_letter_replay  # REPLAY_DEAD_LETTERS; None: dead letters are off
        self._instance_id = instance_id
        self._service = service
        self._signal = signal
        self.joined = {target: asyncio.Event() for target in self.command_targets}  # set once commands are read
        self.heartbeat = InstanceHeartbeat(store, SERVICE, instance_id, self.status,
                                           interval=heartbeat_interval, ttl=3 * heartbeat_interval)
        self.rebuilds = rebuilds  # restores and replays (RESTORE, REPLAY, STOP_REPLAY), reported as `replays`
        if rebuilds is not None:
            rebuilds.on_change = self.heartbeat.poke

    @property
    def instance_id(self) -> str:
        return self._instance_id

    @property
    def command_targets(self) -> tuple[str, str]:
        return BROADCAST_TARGET, f"{SERVICE}:{self._instance_id}"

    async def run(self) -> None:
        broadcast, own = self.command_targets
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self.heartbeat.run())
                group.create_task(self._report_readiness_changes())
                group.create_task(self._serve(broadcast, group_name=f"{broadcast}:{self._instance_id}"))
                group.create_task(self._serve(own, group_name=None))
        finally:
            if self.rebuilds is not None:
                await asyncio.shield(self.rebuilds.aclose())
            await asyncio.shield(self.heartbeat.deregister())

    def status(self) -> Mapping[str, Any]:
        ready, details = self._service.readiness()
        tables = details.get("tables", {})
        for table in self._service.tables:
            entry = tables.get(table.name)
            if isinstance(entry, dict):
                entry["columns"] = column_report(table.indexed.columns)
        replays = {"replays": self.rebuilds.report()} if self.rebuilds is not None else {}
        return {"ready": ready, **details, **replays}

    async def execute(self, command: Command) -> CommandResult:
        """Answer one command; idempotent by command id (nothing here changes state yet)."""
        log.info("command %s (%s) from %s: %s", command.command_id, command.kind.value, command.target,
                 dict(command.args))
        if self.rebuilds is not None and (rebuilt := await self.rebuilds.execute(command)) is not None:
            return rebuilt
        status, message, details = CommandStatus.REJECTED, (f"the query service does not carry out "
                                                            f"{command.kind.value} commands"), {}
        if command.kind is CommandKind.REPLAY_DEAD_LETTERS and self._dead_letter_replay is not None:
            try:
                status, message, details = self._dead_letter_replay.execute(command.args)
            except ValueError as exc:
                status, message = CommandStatus.FAILED, str(exc)
        return CommandResult(command.command_id, status, message, details, executed_by=self._instance_id,
                             finished_unix_ms=int(time.time() * 1000))

    async def _report_readiness_changes(self) -> None:
        while True:
            changed = self._signal.changed()
            await changed.wait()
            self.heartbeat.poke()

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
                    log.warning("result of command %s not stored (%s); it is redelivered and answered again",
                                command.command_id, exc)
        finally:
            await subscription.aclose()

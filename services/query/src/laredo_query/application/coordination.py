"""This instance in the coordination store: a status heartbeat, and the commands addressed to query instances.

The status (service `query`) is {"ready", "address" (host:port of its gRPC port), "tables": {"schema.table":
{ready, baseline_complete, caught_up, rows, position, columns, indexes, subscribers, ...}}}: OAM derives the
indexed-memory pipelines' states from it, answers GetTableSchema with `columns` and routes Query calls to the
ready instances' `address`. It is stored every `heartbeat_interval` and at once when a table's readiness changes.
laredo_core.coordination.instance serves the commands for 'query:*' and 'query:<instance_id>', runs restores and
replays, and hands the rest here. An unreachable store only delays heartbeats and commands, never the data path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from laredo_core.coordination.instance import CommandAnswer, InstanceCoordinator
from laredo_core.coordination.ports import Command, CommandKind, CommandStatus, CoordinationStore
from laredo_core.coordination.status_reports import column_report
from laredo_core.rebuild.instance import InstanceRebuilds

from laredo_query.application.dead_letter_replay import QueryDeadLetterReplay
from laredo_query.application.queries import QueryService
from laredo_query.application.query_table import ReadinessSignal

SERVICE = "query"


class QueryCoordinator:
    """Heartbeat and command loops of one query instance; `run()` until cancelled, then it deregisters."""

    def __init__(self, store: CoordinationStore, instance_id: str, service: QueryService, signal: ReadinessSignal,
                 *, heartbeat_interval: float = 5.0, rebuilds: InstanceRebuilds | None = None,
                 dead_letter_replay: QueryDeadLetterReplay | None = None) -> None:
        self._dead_letter_replay = dead_letter_replay  # REPLAY_DEAD_LETTERS; None: dead letters are off
        self._service = service
        self._signal = signal
        self.instance = InstanceCoordinator(store, SERVICE, instance_id, self._own_status, self._carry_out,
                                            heartbeat_interval=heartbeat_interval, rebuilds=rebuilds)
        self.address = ""  # host:port of this instance's gRPC port, once it serves; OAM routes Query calls there

    async def run(self) -> None:
        await self.instance.run(self._report_readiness_changes)

    def _own_status(self) -> Mapping[str, Any]:
        ready, details = self._service.readiness()
        for table in self._service.tables:
            details["tables"][table.name]["columns"] = column_report(table.indexed.columns)
        status: dict[str, Any] = {"ready": ready, **details}
        if self.address:
            status["address"] = self.address
        return status

    async def _carry_out(self, command: Command) -> CommandAnswer:
        if command.kind is CommandKind.REPLAY_DEAD_LETTERS and self._dead_letter_replay is not None:
            try:
                return self._dead_letter_replay.execute(command.args)
            except ValueError as exc:
                return CommandStatus.FAILED, str(exc), {}
        return CommandStatus.REJECTED, f"the query service does not carry out {command.kind.value} commands", {}

    async def _report_readiness_changes(self) -> None:
        while True:
            await self._signal.changed().wait()
            self.instance.heartbeat.poke()

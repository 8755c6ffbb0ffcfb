"""CreateSnapshot: a SNAPSHOT command to one live fan-out instance per table, waited for (bounded), ids collected.

Fan-out writes the snapshot (it holds the table); OAM only picks the instance: among the live ones that report
the table, ready and not draining ones first, then by instance id. Tables served by one instance go in one
command. Several tables: `snapshot_ids` follow the request order, and the response joins them with ",".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from laredo_kernel.changes import TableId
from laredo_core.coordination.ports import CommandKind, CommandResult, InstanceStatus

from laredo_oam.application.commands import command_answers
from laredo_oam.application.reports import Reports, reported_tables
from laredo_oam.domain.catalog import Catalog
from laredo_oam.domain.errors import PreconditionFailed
from laredo_oam.ports import CoordinationStore

ID_SEPARATOR = ","


@dataclass(frozen=True, slots=True)
class Created:
    """accepted: every table got a snapshot; snapshot_ids: those written, in request order."""

    accepted: bool
    snapshot_ids: tuple[str, ...]
    message: str

    @property
    def snapshot_id(self) -> str:
        return ID_SEPARATOR.join(self.snapshot_ids)


class SnapshotCreation:
    def __init__(self, coordination: CoordinationStore, catalog: Catalog, stored_tables: Sequence[TableId], *,
                 command_timeout: float) -> None:
        self._coordination = coordination
        self._catalog = catalog
        self._stored = tuple(stored_tables)
        self.command_timeout = command_timeout

    async def create(self, tables: Sequence[TableId], user_meta: Mapping[str, Any]) -> Created:
        tables = list(dict.fromkeys(tables)) or list(self._stored)
        for table in tables:
            self._check_configured(table)
        by_instance = self._assign(tables, (await Reports.read(self._coordination)).of("fanout"))
        results = await self._send({instance: [str(t) for t in mine] for instance, mine in by_instance.items()},
                                   dict(user_meta))
        return _created(tables, by_instance, results)

    def _check_configured(self, table: TableId) -> None:
        if table in self._stored:
            return
        self._catalog.require_table(table)  # NotFound naming the configured tables
        raise PreconditionFailed(f"table {table} has no snapshot store: add a snapshot {{ ... }} section to its "
                                 "replication-fanout target (see docs/configuration.md)")

    def _assign(self, tables: list[TableId], instances: Sequence[InstanceStatus]) -> dict[str, list[TableId]]:
        """instance id -> the tables it is asked to snapshot; PreconditionFailed when a table has no instance."""
        by_instance: dict[str, list[TableId]] = {}
        for table in tables:
            entries = [(i, reported_tables(i).get(str(table))) for i in instances]
            serving = [(i, entry) for i, entry in entries if isinstance(entry, Mapping)]
            if not serving:
                raise PreconditionFailed(f"no live fan-out instance serves table {table}, so nobody can take its "
                                         "snapshot; start laredo-fanout with this table (and a redis section) and "
                                         "retry once it reports in")
            best, _ = min(serving, key=lambda s: (not s[1].get("ready", False), bool(s[0].status.get("draining")),
                                                  s[0].instance_id))
            by_instance.setdefault(best.instance_id, []).append(table)
        return by_instance

    async def _send(self, commands: dict[str, list[str]], user_meta: dict[str, Any]) -> dict[str, CommandResult]:
        args = [(f"fanout:{instance}", CommandKind.SNAPSHOT, {"tables": tables, "user_meta": user_meta})
                for instance, tables in commands.items()]
        answers = await command_answers(self._coordination, args, self.command_timeout,
                                        "the snapshot may still be written (ListSnapshots shows it then)")
        return {target.removeprefix("fanout:"): answer for target, answer in answers}


def _created(tables: list[TableId], by_instance: dict[str, list[TableId]],
             results: dict[str, CommandResult]) -> Created:
    ids: list[str] = []
    lines: list[str] = []
    for table in tables:
        instance = next(i for i, mine in by_instance.items() if table in mine)
        result = results[instance]
        snapshot_id = _detail(result, "snapshots").get(str(table))
        if snapshot_id:
            ids.append(str(snapshot_id))
            lines.append(f"{table}: snapshot {snapshot_id} written by {instance}")
            continue
        why = _detail(result, "failed").get(str(table)) or result.message or result.status.value
        lines.append(f"{table}: no snapshot from {instance} ({result.status.value}: {why})")
    return Created(len(ids) == len(tables), tuple(ids), "; ".join(lines))


def _detail(result: CommandResult, key: str) -> Mapping[str, Any]:
    value = result.details.get(key)
    return value if isinstance(value, Mapping) else {}

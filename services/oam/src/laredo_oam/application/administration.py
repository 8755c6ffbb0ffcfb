"""Administration use cases: send a command to the instances that carry it out and wait for their answer.

Commands go to `ingest:<source_id>` (reload, pause, resume, reset) and `fanout:<instance_id>` (drain). The
wait is bounded by `command_timeout`; a command nobody answered in time may still run later (it is durable and
idempotent).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from laredo_core.coordination.ports import CommandKind, CommandResult, CommandStatus

from laredo_oam.application.commands import answer_lines, command_answers
from laredo_oam.application.reports import Reports
from laredo_oam.domain.catalog import Catalog, table_from_request
from laredo_oam.domain.drain import plan_drain
from laredo_oam.domain.errors import InvalidRequest, NotFound, PreconditionFailed
from laredo_oam.ports import CoordinationStore


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the addressed instances answered: accepted only if every one of them succeeded."""

    accepted: bool
    message: str
    results: tuple[CommandResult, ...] = ()

    @property
    def details(self) -> dict[str, Any]:
        """What each instance answered beyond its status, by instance; instances that said nothing more are
        left out (an empty entry reads as if something were missing)."""
        return {r.executed_by or r.command_id: dict(r.details) for r in self.results if r.details}


class Administration:
    def __init__(self, store: CoordinationStore, catalog: Catalog, *, command_timeout: float = 10.0) -> None:
        self._store = store
        self._catalog = catalog
        self.command_timeout = command_timeout

    async def reload_table(self, source_id: str, schema: str, table: str) -> Outcome:
        table_id = table_from_request(schema, table)
        await self._sources(source_id)  # an unknown source is named first
        sources = sorted({t.source_id for t in self._catalog.require_table(table_id, source_id)})
        return await self._to_sources(sources, CommandKind.RELOAD, {"schema": table_id.schema,
                                                                    "table": table_id.name})

    async def reload_all(self, source_id: str) -> Outcome:
        return await self._to_sources(await self._sources(source_id), CommandKind.RELOAD, {})

    async def pause(self, source_id: str) -> Outcome:
        return await self._to_sources(await self._sources(source_id), CommandKind.PAUSE, {})

    async def resume(self, source_id: str) -> Outcome:
        return await self._to_sources(await self._sources(source_id), CommandKind.RESUME, {})

    async def reset(self, source_id: str, *, confirm: bool, drop_publication: bool) -> Outcome:
        if not source_id:
            raise InvalidRequest("source_id is required: a reset drops and recreates one source's slot")
        if not confirm:
            raise PreconditionFailed(f"resetting source {source_id} drops its replication slot and re-baselines "
                                     "every table; repeat the request with confirm=true to do it")
        sources = await self._sources(source_id)
        return await self._to_sources(sources, CommandKind.RESET, {"drop_publication": drop_publication})

    async def drain(self, schema: str, table: str, deadline_seconds: int, *, instance_id: str = "",
                    force: bool = False) -> Outcome:
        """Drain one fan-out instance (all its tables, or one), or without an instance every instance serving
        the table; refused (PreconditionFailed) when a table would be left without a ready instance, unless
        `force` (see laredo_oam.domain.drain)."""
        if deadline_seconds < 0:
            raise InvalidRequest(f"drain_deadline_seconds must be 0 (none) or positive, got {deadline_seconds}")
        table_id = None
        if table or schema:
            table_id = table_from_request(schema, table)
            pipelines = self._catalog.pipelines()
            if not any(p.table == table_id and p.target_type == "replication-fanout" for p in pipelines):
                raise NotFound(f"no fan-out target exists for table {table_id}")
        fanouts = (await Reports.read(self._store)).of("fanout")
        if not fanouts:
            return Outcome(False, "no fan-out instance is running: nothing to drain")
        plan = plan_drain(fanouts, table_id, instance_id.strip(), force=force)
        if not plan.instances:
            return Outcome(False, f"no running fan-out instance serves {table_id}: nothing to drain")
        deadline_ms = int((time.time() + deadline_seconds) * 1000) if deadline_seconds else 0
        args = {"schema": table_id.schema if table_id else "", "table": table_id.name if table_id else "",
                "deadline_unix_ms": deadline_ms}
        outcome = await self._send_all([(f"fanout:{i}", CommandKind.DRAIN, {**args, "instance_id": i})
                                        for i in plan.instances])
        if not plan.stranded:
            return outcome
        warning = f"forced: no ready fan-out instance is left for {', '.join(plan.stranded)}"
        return Outcome(outcome.accepted, f"{warning}; {outcome.message}", outcome.results)

    async def _sources(self, source_id: str) -> list[str]:
        """The named source (checked to exist) or, when empty, every known source."""
        reports = await Reports.read(self._store)
        if source_id:
            return list(reports.require_source(self._catalog, source_id))
        known = list(reports.source_ids(self._catalog))
        if not known:
            raise NotFound("no source is configured or reported; nothing to address")
        return known

    async def _to_sources(self, sources: list[str], kind: CommandKind, args: Mapping[str, Any]) -> Outcome:
        return await self._send_all([(f"ingest:{s}", kind, args) for s in sources])

    async def _send_all(self, commands: list[tuple[str, CommandKind, Mapping[str, Any]]]) -> Outcome:
        answers = await command_answers(self._store, commands, self.command_timeout, "the command stays queued and "
                                        "runs when an instance reads it (is it running, with commands enabled?)")
        return Outcome(all(r.status is CommandStatus.SUCCEEDED for _, r in answers), answer_lines(answers),
                       tuple(r for _, r in answers))

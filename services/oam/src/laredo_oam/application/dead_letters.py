"""Dead-letter use cases: list, replay and purge the changes a pipeline could not apply.

The letters live in the DeadLetterStore (JetStream); OAM reads and removes them there. A replay goes through the
coordination store: OAM sends the letters, a page at a time, in the order they were recorded, with a
REPLAY_DEAD_LETTERS command to every live instance of the pipeline's target service that serves the table; each
re-applies them to its own rows (laredo_core.deadletters.replay). Counts are per letter, not per instance: a letter
succeeded when every instance that answered applied it (or found it overtaken by a later change) and is then
removed; if any instance failed it, it failed: it stays, with that instance's reason and one more failed replay.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from laredo_core.coordination.ports import CommandKind, CommandResult, CommandStatus
from laredo_core.deadletters.model import DeadLetter, DeadLetterPage, PipelineId
from laredo_core.deadletters.replay import ReplayOutcome, ReplayReport, pages, replay_args

from laredo_oam.application.commands import command_answers
from laredo_oam.application.reports import Reports
from laredo_oam.domain.catalog import Catalog, PipelineKey
from laredo_oam.domain.errors import InvalidRequest, PreconditionFailed
from laredo_oam.domain.states import TARGET_SERVICES
from laredo_oam.ports import CoordinationStore, DeadLetterStore

#: ListDeadLetters answers at most this many letters (limit 0 or above it: this many); total_count tells them all.
MAX_LIST = 1000
#: Letters read from the store at a time while replaying.
READ_PAGE = 500


@dataclass(frozen=True, slots=True)
class ReplayTotals:
    replayed: int = 0
    succeeded: int = 0
    failed: int = 0


class DeadLetters:
    """`store` None: dead letters are switched off (dead_letters.enabled = false)."""

    def __init__(self, catalog: Catalog, store: DeadLetterStore | None, coordination: CoordinationStore, *,
                 command_timeout: float = 10.0) -> None:
        self._catalog = catalog
        self._store = store
        self._coordination = coordination
        self.command_timeout = command_timeout

    async def list(self, pipeline_id: str, limit: int = 0) -> DeadLetterPage:
        """The oldest letters first (in the order they were recorded), at most `limit` (0: up to MAX_LIST)."""
        if limit < 0:
            raise InvalidRequest(f"limit must be 0 (up to {MAX_LIST}) or positive, got {limit}")
        pipeline, store = self._pipeline(pipeline_id), self._require_store()
        return await store.list(pipeline, limit=min(limit or MAX_LIST, MAX_LIST))

    async def purge(self, pipeline_id: str) -> int:
        pipeline, store = self._pipeline(pipeline_id), self._require_store()
        return await store.purge(pipeline)

    async def replay(self, pipeline_id: str) -> ReplayTotals:
        pipeline, store = self._pipeline(pipeline_id), self._require_store()
        first = await store.list(pipeline, limit=READ_PAGE)
        if not first.letters:
            return ReplayTotals()
        targets = await self._target_instances(pipeline)
        bound = first.newest_sequence  # letters rewritten by this replay get higher sequences: never re-read
        totals, page = ReplayTotals(), first
        while True:
            letters = [letter for letter in page.letters if letter.store_sequence <= bound]
            for chunk in pages(letters):
                totals = _add(totals, await self._replay_page(store, pipeline, targets, chunk))
            if not page.letters or len(letters) < len(page.letters) or len(page.letters) < READ_PAGE:
                return totals
            page = await store.list(pipeline, limit=READ_PAGE, after_sequence=page.letters[-1].store_sequence)

    def _pipeline(self, pipeline_id: str) -> PipelineId:
        key = self._catalog.require_pipeline(pipeline_id)
        return PipelineId(key.source_id, key.table, key.target_type)

    def _require_store(self) -> DeadLetterStore:
        if self._store is None:
            raise PreconditionFailed("no dead-letter store is configured: dead letters are switched off "
                                     "(dead_letters.enabled = false); switch them on to keep what consumers "
                                     "cannot apply")
        return self._store

    async def _target_instances(self, pipeline: PipelineId) -> list[str]:
        """The command targets of the live instances of the pipeline's target service that serve its table."""
        key = PipelineKey(pipeline.source_id, pipeline.table, pipeline.target_type)
        service = TARGET_SERVICES.get(key.target_type, key.target_type)
        reports = await Reports.read(self._coordination)
        targets = [f"{service}:{instance.instance_id}" for instance, _ in reports.target_tables(key)]
        if not targets:
            raise PreconditionFailed(f"no running {service} instance serves {pipeline.table}: a replay re-applies the "
                                     f"letters on the running instances of the target; start one, then replay")
        return targets

    async def _replay_page(self, store: DeadLetterStore, pipeline: PipelineId, targets: list[str],
                           letters: list[DeadLetter]) -> ReplayTotals:
        reports = await self._send(targets, replay_args(pipeline, letters))
        succeeded, failed = merge_reports(letters, reports)
        if succeeded:
            await store.remove(pipeline, succeeded)
        by_id = {letter.letter_id: letter for letter in letters}
        for letter_id, reason in failed.items():
            letter = by_id[letter_id]
            await store.write(dataclasses.replace(letter, error=reason, replays=letter.replays + 1))
        return ReplayTotals(len(letters), len(succeeded), len(failed))

    async def _send(self, targets: list[str], args: Mapping[str, object]) -> dict[str, ReplayReport]:
        """Send the page to every instance and wait (bounded) for their answers."""
        commands = [(t, CommandKind.REPLAY_DEAD_LETTERS, args) for t in targets]
        answers = await command_answers(self._coordination, commands, self.command_timeout, "the letters of this "
                                        "page stay in the store (the replay may still run there; replay again)")
        return {target: _report(result) for target, result in answers if result.status is not CommandStatus.REJECTED}


def merge_reports(letters: Sequence[DeadLetter],
                  reports: Mapping[str, ReplayReport]) -> tuple[list[str], dict[str, str]]:
    """Letters every instance applied (or found overtaken), and the others with the first reason given."""
    succeeded: list[str] = []
    failed: dict[str, str] = {}
    if not reports:
        return [], {letter.letter_id: "no instance serving the pipeline took part in the replay" for letter in letters}
    for letter in letters:
        for target, report in reports.items():
            outcome = report.outcomes.get(letter.letter_id)
            if outcome is None:
                why = report.reasons.get("*")
                failed[letter.letter_id] = f"{target} did not replay it" + (f": {why}" if why else "")
            elif outcome is ReplayOutcome.FAILED:
                failed[letter.letter_id] = report.reasons.get(letter.letter_id) or f"{target} failed it"
            else:
                continue
            break
        else:
            succeeded.append(letter.letter_id)
    return succeeded, failed


def _report(result: CommandResult) -> ReplayReport:
    if result.status is CommandStatus.SUCCEEDED:
        return ReplayReport.from_details(result.details)
    return ReplayReport(reasons={"*": result.message})  # FAILED: no letter was replayed there


def _add(a: ReplayTotals, b: ReplayTotals) -> ReplayTotals:
    return ReplayTotals(a.replayed + b.replayed, a.succeeded + b.succeeded, a.failed + b.failed)

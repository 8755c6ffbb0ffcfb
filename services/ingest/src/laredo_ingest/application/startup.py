"""Start-up of one attempt: check the server, resolve the tables, keep the publication in step."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from laredo_core.changes import TableId
from laredo_core.stream.naming import deadletter_subject

from laredo_ingest.application.options import IngestOptions, KeylessPolicy
from laredo_ingest.domain.errors import PublicationError, SlotInUse, TableWithoutKey
from laredo_ingest.domain.prerequisites import (
    PG15,
    PublishedTable,
    check_capacity,
    check_server,
    check_tables_exist,
    plan_publication,
)
from laredo_ingest.domain.schema import TableSchema, key_problem, restrict_columns
from laredo_ingest.domain.start_plan import SlotInfo
from laredo_ingest.ports import SourceDatabase

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PreparedSource:
    """The configured tables as the publication publishes them, and what the baseline must copy."""

    schemas: Mapping[TableId, TableSchema]  # published columns only, in tuple order
    row_filters: Mapping[TableId, str]
    fingerprints: tuple[str, ...]  # sorted; a change means downstream needs a new baseline
    slot: SlotInfo | None
    keyless: tuple[TableId, ...]


async def prepare_source(db: SourceDatabase, options: IngestOptions) -> PreparedSource:
    """Raise a typed error for anything an operator must fix; return the configured tables' schemas."""
    facts = await db.server_facts()
    check_server(facts)
    slot = await db.slot(options.slot_name)
    check_capacity(facts, slot_exists=slot is not None)
    if options.published and facts.server_version_num < PG15:
        raise PublicationError(f"column lists and row filters need PostgreSQL 15 or later; {facts.where} runs "
                               f"version {facts.server_version_num}")
    schemas = await db.describe_tables(options.tables)
    check_tables_exist(options.tables, schemas, facts.where)
    current = await db.publication(options.publication_name)
    change = plan_publication(options.publication_name, current, options.tables, manage=options.publication_create,
                              source_id=options.source_id, restrictions=options.published)
    if not change.empty:
        log.info("publication %s: %s", options.publication_name, change.describe())
        await db.change_publication(options.publication_name, change)
        current = await db.publication(options.publication_name)
    details = current.details if current is not None else {}
    published = {t: _published_schema(schemas[t], details.get(t)) for t in options.tables}
    keyless = tuple(t for t in options.tables if not published[t].has_usable_key)
    _report_keyless(published, keyless, options)
    return PreparedSource(
        schemas=published,
        row_filters={t: details[t].row_filter for t in options.tables if t in details and details[t].row_filter},
        fingerprints=tuple(sorted(details[t].fingerprint if t in details else str(t) for t in options.tables)),
        slot=slot, keyless=keyless)


async def describe_published(db: SourceDatabase, options: IngestOptions,
                             tables: Sequence[TableId]) -> tuple[dict[TableId, TableSchema], dict[TableId, str]]:
    """Schemas and row filters of some configured tables as published now (for a re-baseline)."""
    schemas = await db.describe_tables(tables)
    check_tables_exist(tables, schemas, "the source database")
    current = await db.publication(options.publication_name)
    details = current.details if current is not None else {}
    return ({t: _published_schema(schemas[t], details.get(t)) for t in tables},
            {t: details[t].row_filter for t in tables if t in details and details[t].row_filter})


def _published_schema(schema: TableSchema, published: PublishedTable | None) -> TableSchema:
    if published is None or not published.has_column_list:
        return schema
    return restrict_columns(schema, published.columns)


def _report_keyless(schemas: Mapping[TableId, TableSchema], keyless: Sequence[TableId],
                    options: IngestOptions) -> None:
    problems = [key_problem(schemas[t]) for t in keyless]
    if not problems:
        return
    if options.keyless_tables is KeylessPolicy.FAIL:
        raise TableWithoutKey("; ".join(problems) + f" (sources.{options.source_id}.keyless_tables = fail)")
    for table, problem in zip(keyless, problems):
        log.error("%s; until then its baseline and changes are not published on its table subject: they become "
                  "dead letters of its pipelines (ListDeadLetters), or go to the subject %s when dead letters are "
                  "off", problem, deadletter_subject(options.subject_prefix, options.source_id, table))


def check_slot_free(slot: SlotInfo | None) -> None:
    if slot is not None and slot.active:
        raise SlotInUse(
            f"replication slot {slot.name} is in use by another connection; stop the other ingest "
            "instance of this source (or change slot_name); retrying")

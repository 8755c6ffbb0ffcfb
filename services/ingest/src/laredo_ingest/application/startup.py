"""Start-up of one attempt: check the server, resolve the tables, keep the publication in step."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from laredo_kernel.changes import TableId

from laredo_ingest.application.options import IngestOptions, KeylessPolicy
from laredo_ingest.domain.errors import NoTableToServe, PublicationError, SlotInUse, TableWithoutKey
from laredo_ingest.domain.message_limits import MessageLimits
from laredo_ingest.domain.prerequisites import (
    PG15,
    PublicationState,
    check_capacity,
    check_server,
    check_tables_exist,
    plan_publication,
    refuse_unsafe_tables,
)
from laredo_ingest.domain.schema import TableSchema, restrict_columns
from laredo_ingest.domain.start_plan import SlotInfo
from laredo_ingest.ports import MessageSizeLimit, SourceDatabase

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PreparedSource:
    """The served tables as the publication publishes them, what the baseline must copy, and the refused ones."""

    schemas: Mapping[TableId, TableSchema]  # served tables; published columns only, in tuple order
    row_filters: Mapping[TableId, str]
    fingerprints: tuple[str, ...]  # sorted, served tables; a change means downstream needs a new baseline
    slot: SlotInfo | None
    keyless: tuple[TableId, ...]  # refused for want of a replica identity
    tables: tuple[TableId, ...] = ()  # the configured tables ingest serves, in configuration order
    refused: Mapping[TableId, str] = field(default_factory=dict)  # the others: what is wrong, how to fix it
    limits: MessageLimits = MessageLimits(512 * 1024)


async def prepare_source(db: SourceDatabase, options: IngestOptions,
                         message_limit: MessageSizeLimit | None = None) -> PreparedSource:
    """Raise a typed error for anything an operator must fix; return the served tables' schemas.

    Every table is checked before the publication is touched (and before any slot exists): a table
    PostgreSQL could not publish without rejecting the application's UPDATE and DELETE is refused (kept out
    of the publication, reported), and the others are served; with keyless_tables = fail, or when no table
    is left, ingest does not start.
    """
    facts = await db.server_facts()
    check_server(facts)
    slot = await db.slot(options.slot_name)
    check_capacity(facts, slot_exists=slot is not None)
    if options.published and facts.server_version_num < PG15:
        raise PublicationError(f"column lists and row filters need PostgreSQL 15 or later; {facts.where} runs "
                               f"version {facts.server_version_num}")
    catalog = await db.describe_tables(options.tables)
    check_tables_exist(options.tables, catalog, facts.where)
    refused = refuse_unsafe_tables(catalog, options.published, publication=options.publication_name)
    _report_refused(refused, options)
    served = tuple(t for t in options.tables if t not in refused)
    current = await db.publication(options.publication_name)
    change = plan_publication(options.publication_name, current, served, manage=options.publication_create,
                              source_id=options.source_id,
                              restrictions=[s for s in options.published if s.table not in refused])
    if not change.empty:
        log.info("publication %s: %s", options.publication_name, change.describe())
        await db.change_publication(options.publication_name, change)
        current = await db.publication(options.publication_name)
    _report_unmanaged(current, refused, options)
    details = current.details if current is not None else {}
    schemas, row_filters = _as_published(catalog, current, served)
    max_payload = await message_limit.max_payload() if message_limit is not None else 0
    return PreparedSource(
        schemas=schemas, row_filters=row_filters,
        fingerprints=tuple(sorted(details[t].fingerprint if t in details else str(t) for t in served)),
        slot=slot, keyless=tuple(t for t in refused if not catalog[t].has_usable_key), tables=served,
        refused=refused, limits=MessageLimits(options.max_batch_bytes, max_payload))


async def describe_published(db: SourceDatabase, options: IngestOptions,
                             tables: Sequence[TableId]) -> tuple[dict[TableId, TableSchema], dict[TableId, str]]:
    """Schemas and row filters of some configured tables as published now (for a re-baseline)."""
    schemas = await db.describe_tables(tables)
    check_tables_exist(tables, schemas, "the source database")
    return _as_published(schemas, await db.publication(options.publication_name), tables)


def _as_published(catalog: Mapping[TableId, TableSchema], publication: PublicationState | None,
                  tables: Sequence[TableId]) -> tuple[dict[TableId, TableSchema], dict[TableId, str]]:
    """The tables' schemas restricted to their published columns (a column list), and their row filters."""
    details = publication.details if publication is not None else {}
    published = {t: details.get(t) for t in tables}
    return ({t: restrict_columns(catalog[t], p.columns) if p and p.has_column_list else catalog[t]
             for t, p in published.items()},
            {t: p.row_filter for t, p in published.items() if p and p.row_filter})


def _report_refused(refused: Mapping[TableId, str], options: IngestOptions) -> None:
    if not refused:
        return
    problems = "; ".join(refused.values())
    if options.keyless_tables is KeylessPolicy.FAIL:
        raise TableWithoutKey(f"{problems} (sources.{options.source_id}.keyless_tables = fail: ingest does not "
                              "start while a configured table is refused)")
    if len(refused) == len(options.tables):
        raise NoTableToServe(f"no configured table of source {options.source_id} can be published: {problems}; "
                             "retrying")
    for problem in refused.values():
        log.error("%s", problem)


def _report_unmanaged(current: PublicationState | None, refused: Mapping[TableId, str],
                      options: IngestOptions) -> None:
    """A publication ingest does not manage may publish a refused table anyway: say whose move it is."""
    published = [t for t in refused if current is not None and (current.all_tables or t in current.tables)]
    for table in published:
        log.error("publication %s publishes %s (it is not managed by ingest, or FOR ALL TABLES), so PostgreSQL "
                  "rejects UPDATE and DELETE on it: fix the table, or run ALTER PUBLICATION %s DROP TABLE %s",
                  options.publication_name, table, options.publication_name, table)


def check_slot_free(slot: SlotInfo | None) -> None:
    if slot is not None and slot.active:
        raise SlotInUse(
            f"replication slot {slot.name} is in use by another connection; stop the other ingest "
            "instance of this source (or change slot_name); retrying")

"""Start-up of one attempt: check the server, resolve the tables, keep the publication in step."""

from __future__ import annotations

import logging

from laredo_core.changes import TableId

from laredo_ingest.application.options import IngestOptions
from laredo_ingest.domain.errors import SlotInUse
from laredo_ingest.domain.prerequisites import check_server, check_tables_exist, plan_publication
from laredo_ingest.domain.schema import TableSchema
from laredo_ingest.domain.start_plan import SlotInfo
from laredo_ingest.ports import SourceDatabase

log = logging.getLogger(__name__)


async def prepare_source(db: SourceDatabase, options: IngestOptions) -> dict[TableId, TableSchema]:
    """Raise a typed error for anything an operator must fix; return the configured tables' schemas."""
    facts = await db.server_facts()
    check_server(facts)
    schemas = await db.describe_tables(options.tables)
    check_tables_exist(options.tables, schemas, facts.where)
    current = await db.publication(options.publication_name)
    change = plan_publication(options.publication_name, current, options.tables,
                              manage=options.publication_create, source_id=options.source_id)
    if not change.empty:
        log.info("publication %s: %s", options.publication_name, "; ".join(
            part for part in ("create" if change.create else "",
                              f"add {', '.join(map(str, change.add))}" if change.add else "",
                              f"drop {', '.join(map(str, change.drop))}" if change.drop else "") if part))
        await db.change_publication(options.publication_name, change)
    return {table: schemas[table] for table in options.tables}


def check_slot_free(slot: SlotInfo | None) -> None:
    if slot is not None and slot.active:
        raise SlotInUse(
            f"replication slot {slot.name} is in use by another connection; stop the other ingest "
            "instance of this source (or change slot_name); retrying")

"""One consistent read of what every instance reports, and lookups into it (pure after the read)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from laredo_kernel.changes import TableId
from laredo_core.coordination.ports import InstanceStatus

from laredo_oam.domain.catalog import Catalog, PipelineKey
from laredo_oam.domain.errors import NotFound
from laredo_oam.domain.states import TARGET_SERVICES, mapping_in
from laredo_oam.ports import CoordinationStore


@dataclass(frozen=True, slots=True)
class Reports:
    """The live instances of every service, read once per request."""

    instances: tuple[InstanceStatus, ...]

    @classmethod
    async def read(cls, store: CoordinationStore) -> Reports:
        return cls(tuple(await store.instances()))

    def of(self, service: str) -> tuple[InstanceStatus, ...]:
        return tuple(i for i in self.instances if i.service == service)

    def source_ids(self, catalog: Catalog) -> tuple[str, ...]:
        """The configured sources and those an ingest instance reports, sorted."""
        reported = {str(i.status["source"]) for i in self.of("ingest") if i.status.get("source")}
        return tuple(sorted({s.source_id for s in catalog.sources} | reported))

    def require_source(self, catalog: Catalog, source_id: str) -> tuple[str]:
        """(source_id,) when it is configured or reported; NotFound naming the known sources otherwise."""
        known = self.source_ids(catalog)
        if source_id not in known:
            raise NotFound(f"source {source_id!r} is not configured and no ingest instance reports it; "
                           f"known sources: {', '.join(known) or 'none'}")
        return (source_id,)

    def ingest(self, source_id: str) -> InstanceStatus | None:
        """The instance reading the source: its leader, else any instance reporting it (e.g. a standby)."""
        reporting = [i for i in self.of("ingest") if i.status.get("source") == source_id]
        leaders = [i for i in reporting if i.status.get("leader", True)]
        return (leaders or reporting or [None])[0]

    def target_tables(self, key: PipelineKey) -> list[tuple[InstanceStatus, Mapping[str, Any]]]:
        """Each instance of the target's service that reports this table, with its report of it."""
        service = TARGET_SERVICES.get(key.target_type, key.target_type)
        entries = ((instance, reported_tables(instance).get(str(key.table))) for instance in self.of(service))
        return [(instance, entry) for instance, entry in entries if isinstance(entry, Mapping)]

    def reported_columns(self, table: TableId) -> list[Any]:
        """The first column list any instance reports for the table (`tables[<t>].columns`), else []."""
        for instance in self.instances:
            entry = reported_tables(instance).get(str(table))
            if isinstance(entry, Mapping) and isinstance(entry.get("columns"), list) and entry["columns"]:
                return list(entry["columns"])
        return []


def reported_tables(instance: InstanceStatus) -> Mapping[str, Any]:
    """The instance's report of each table it serves, by "schema.table" ({} when it reports none)."""
    return mapping_in(instance.status, "tables")

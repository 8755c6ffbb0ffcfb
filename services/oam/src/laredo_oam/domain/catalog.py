"""What OAM knows from configuration: sources, tables and their pipelines, and the pipeline id format."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from laredo_kernel.changes import TableId

from laredo_oam.domain.errors import InvalidRequest, NotFound


@dataclass(frozen=True, slots=True)
class PipelineKey:
    """One table flowing from one source into one target type: id `<source>:<schema>.<table>:<target-type>`."""

    source_id: str
    table: TableId
    target_type: str

    @property
    def pipeline_id(self) -> str:
        return f"{self.source_id}:{self.table.schema}.{self.table.name}:{self.target_type}"

    @classmethod
    def parse(cls, pipeline_id: str) -> PipelineKey:
        parts = pipeline_id.split(":")
        table = parts[1] if len(parts) == 3 else ""
        if len(parts) != 3 or not parts[0] or not parts[2] or "." not in table:
            raise InvalidRequest(f"pipeline_id {pipeline_id!r} is malformed; expected "
                                 "<source>:<schema>.<table>:<target-type>, e.g. pg:public.users:replication-fanout")
        schema, name = table.split(".", 1)
        return cls(parts[0], TableId(schema, name), parts[2])


@dataclass(frozen=True, slots=True)
class ConfiguredSource:
    source_id: str
    source_type: str = "postgresql"
    supports_resume: bool = True  # a stateful slot resumes where it stopped
    details: Mapping[str, Any] = field(default_factory=dict)  # safe to show: never the connection string


@dataclass(frozen=True, slots=True)
class ConfiguredTarget:
    target_type: str
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ConfiguredTable:
    source_id: str
    table: TableId
    targets: tuple[ConfiguredTarget, ...] = ()

    def pipelines(self) -> tuple[PipelineKey, ...]:
        return tuple(PipelineKey(self.source_id, self.table, t.target_type) for t in self.targets)


@dataclass(frozen=True, slots=True)
class Catalog:
    sources: tuple[ConfiguredSource, ...] = ()
    tables: tuple[ConfiguredTable, ...] = ()

    def source(self, source_id: str) -> ConfiguredSource | None:
        return next((s for s in self.sources if s.source_id == source_id), None)

    def pipelines(self) -> tuple[PipelineKey, ...]:
        return tuple(p for t in self.tables for p in t.pipelines())

    def pipeline_ids(self) -> str:
        """The configured pipeline ids for a message ("none" when there is none)."""
        return ", ".join(p.pipeline_id for p in self.pipelines()) or "none"

    def require_pipeline(self, pipeline_id: str) -> PipelineKey:
        """The configured pipeline of this id; InvalidRequest when it is empty or malformed, NotFound when it is
        not configured."""
        if not pipeline_id:
            raise InvalidRequest("pipeline_id is required: <source>:<schema>.<table>:<target-type>, "
                                 "e.g. pg:public.users:replication-fanout")
        key = PipelineKey.parse(pipeline_id)
        if key not in self.pipelines():
            raise NotFound(f"pipeline {pipeline_id!r} does not exist; configured pipelines: {self.pipeline_ids()}")
        return key

    def tables_named(self, table: TableId) -> tuple[ConfiguredTable, ...]:
        return tuple(t for t in self.tables if t.table == table)

    def require_table(self, table: TableId, source_id: str = "") -> tuple[ConfiguredTable, ...]:
        """The table's configurations (of `source_id` only, when given); NotFound naming the configured tables."""
        named = self.tables_named(table)
        found = tuple(t for t in named if not source_id or t.source_id == source_id)
        if found:
            return found
        known = ", ".join(sorted({str(t.table) for t in self.tables})) or "none"
        if named:
            sources = ", ".join(sorted({t.source_id for t in named}))
            raise NotFound(f"table {table} is not configured for source {source_id}; it comes from source "
                           f"{sources} (leave the source out or name that one)")
        raise NotFound(f"table {table} is not configured; configured tables: {known} (see ListTables)")


def table_from_request(schema: str, table: str) -> TableId:
    """schema + table of a request (schema defaults to public; 'schema.table' in table is accepted)."""
    if not table:
        raise InvalidRequest("table is required: name the table (schema defaults to 'public')")
    if not schema and "." in table:
        schema, table = table.split(".", 1)
    return TableId(schema or "public", table)

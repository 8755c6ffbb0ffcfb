"""Start-up checks of the source server and the publication plan, as pure decisions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from laredo_kernel.changes import TableId

from laredo_ingest.domain.errors import (
    MissingReplicationPrivilege,
    PublicationError,
    ReplicationCapacityExhausted,
    SourceMisconfigured,
    TableNotFound,
    WalLevelNotLogical,
)
from laredo_ingest.domain.schema import TableSchema, key_problem

#: PostgreSQL 15: row filters and column lists in publications.
PG15 = 150000


@dataclass(frozen=True, slots=True)
class ServerFacts:
    where: str  # host:port/dbname, never the password
    role: str
    wal_level: str
    is_superuser: bool
    has_replication: bool
    server_version_num: int = PG15
    max_replication_slots: int = 10
    slots_in_use: tuple[str, ...] = ()
    max_wal_senders: int = 10
    wal_senders_in_use: int = 0


def check_server(facts: ServerFacts) -> None:
    if facts.wal_level != "logical":
        raise WalLevelNotLogical(
            f"PostgreSQL at {facts.where} has wal_level = {facts.wal_level!r}; logical replication needs "
            "wal_level = logical: run ALTER SYSTEM SET wal_level = logical (or set it in postgresql.conf) "
            "and restart the server")
    if not (facts.is_superuser or facts.has_replication):
        raise MissingReplicationPrivilege(
            f"role {facts.role!r} on {facts.where} has neither REPLICATION nor SUPERUSER; run "
            f"ALTER ROLE {_quote_ident(facts.role)} REPLICATION as a superuser, or connect as a role that has it")


def check_capacity(facts: ServerFacts, *, slot_exists: bool) -> None:
    """Room for our walsender and (unless it exists) our slot; zero limits can never work."""
    for name, limit in (("max_replication_slots", facts.max_replication_slots),
                        ("max_wal_senders", facts.max_wal_senders)):
        if limit == 0:
            raise SourceMisconfigured(
                f"PostgreSQL at {facts.where} has {name} = 0; logical replication needs at least 1 (ingest uses "
                f"one, two during an on-demand re-baseline): set {name} in postgresql.conf and restart the server")
    if not slot_exists and len(facts.slots_in_use) >= facts.max_replication_slots:
        raise ReplicationCapacityExhausted(
            f"PostgreSQL at {facts.where} has max_replication_slots = {facts.max_replication_slots} and all are "
            f"in use ({', '.join(facts.slots_in_use)}); drop unused ones with pg_drop_replication_slot(name), "
            "or raise max_replication_slots (server restart); retrying")
    if facts.wal_senders_in_use >= facts.max_wal_senders:
        raise ReplicationCapacityExhausted(
            f"PostgreSQL at {facts.where} has max_wal_senders = {facts.max_wal_senders} and "
            f"{facts.wal_senders_in_use} replication connection(s) already; raise max_wal_senders (server "
            "restart) or stop other replication clients; retrying")


def check_tables_exist(wanted: Iterable[TableId], found: Iterable[TableId], where: str) -> None:
    missing = sorted(str(t) for t in set(wanted) - set(found))
    if missing:
        raise TableNotFound(
            f"configured table(s) {', '.join(missing)} do not exist in {where}; create them, or fix "
            "schema/table in the tables section of the configuration")


def refuse_unsafe_tables(tables: Mapping[TableId, TableSchema], restrictions: Iterable[PublishedTableSpec], *,
                         publication: str) -> dict[TableId, str]:
    """Configured tables that must stay out of the publication, each with what is wrong and how to fix it.

    PostgreSQL rejects the application's own UPDATE and DELETE on a table a publication publishes when the
    table has no replica identity (no primary key with REPLICA IDENTITY DEFAULT, or NOTHING), or when the
    publication's column list leaves out a replica identity column. Such a table is never added (a managed
    publication drops it): the source keeps working, and the other tables are served.
    """
    specs = {s.table: s for s in restrictions}
    refused = {}
    for table in sorted(tables, key=str):
        problem = key_problem(tables[table]) or _column_list_problem(tables[table], specs.get(table))
        if problem:
            refused[table] = (f"{problem}. Ingest keeps it out of publication {publication} and does not replicate "
                              "it; once it is fixed, restart ingest (a new baseline follows)")
    return refused


def _column_list_problem(schema: TableSchema, spec: PublishedTableSpec | None) -> str:
    if spec is None or not spec.columns:
        return ""
    missing = [c.name for c in schema.columns if c.is_identity_key and c.name not in spec.columns]
    if not missing:
        return ""
    return (f"the column list configured for table {schema.table} (publication.column_lists) leaves out its replica "
            f"identity column(s) {', '.join(missing)}, and PostgreSQL rejects UPDATE and DELETE on a table whose "
            "published columns do not cover its replica identity; add them to the list")


@dataclass(frozen=True, slots=True)
class PublishedTableSpec:
    """A configured restriction of a managed publication: a column list and/or a row filter."""

    table: TableId
    columns: tuple[str, ...] = ()  # empty: every column
    row_filter: str = ""  # SQL boolean expression; empty: every row

    def sql_hint(self) -> str:
        return (f"{self.table}" + (f" ({', '.join(self.columns)})" if self.columns else "")
                + (f" WHERE ({self.row_filter})" if self.row_filter else ""))


@dataclass(frozen=True, slots=True)
class PublishedTable:
    """How a publication publishes one table (pg_publication_tables, PostgreSQL 15)."""

    table: TableId
    columns: tuple[str, ...]  # the published columns
    has_column_list: bool = False
    row_filter: str = ""  # as PostgreSQL deparses it; empty: every row

    @property
    def fingerprint(self) -> str:
        """What downstream data depends on: a different fingerprint needs a new baseline of the table."""
        return (str(self.table) + (f" ({','.join(self.columns)})" if self.has_column_list else "")
                + (f" WHERE {self.row_filter}" if self.row_filter else ""))


@dataclass(frozen=True, slots=True)
class PublicationState:
    all_tables: bool
    tables: frozenset[TableId]
    details: Mapping[TableId, PublishedTable] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PublicationChange:
    create: bool = False
    add: tuple[TableId, ...] = ()
    drop: tuple[TableId, ...] = ()
    #: Replace the table list with exactly these (with their column lists and row filters); the adapter
    #: runs it in a transaction and rolls it back when nothing changed.
    set_tables: tuple[PublishedTableSpec, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.create or self.add or self.drop or self.set_tables)

    def describe(self) -> str:
        parts = ["create" if self.create else "",
                 f"add {', '.join(map(str, self.add))}" if self.add else "",
                 f"drop {', '.join(map(str, self.drop))}" if self.drop else "",
                 f"set tables {', '.join(s.sql_hint() for s in self.set_tables)}" if self.set_tables else ""]
        return "; ".join(p for p in parts if p)


def plan_publication(name: str, current: PublicationState | None, wanted: Iterable[TableId], *,
                     manage: bool, source_id: str,
                     restrictions: Iterable[PublishedTableSpec] = ()) -> PublicationChange:
    """What to run so the publication publishes exactly the configured tables (manage), or check it does.

    A managed publication with configured column lists or row filters, or one that has restrictions the
    configuration does not name, is set as a whole (SET TABLE), so it follows the configuration exactly.
    """
    wanted_set = frozenset(wanted)
    specs = {s.table: s for s in restrictions}
    unknown = sorted(str(t) for t in set(specs) - wanted_set)
    if unknown:
        raise PublicationError(f"sources.{source_id}.publication: column lists or row filters name "
                               f"{', '.join(unknown)}, which no table of this source configures")
    full = tuple(specs.get(t, PublishedTableSpec(t)) for t in _sorted(wanted_set))
    if current is None:
        if manage:
            return PublicationChange(create=True, add=_sorted(wanted_set), set_tables=full if specs else ())
        raise PublicationError(
            f"publication {name!r} does not exist; create it with CREATE PUBLICATION {_quote_ident(name)} "
            f"FOR TABLE {', '.join(s.sql_hint() for s in full)}, or set "
            f"sources.{source_id}.publication.create = true")
    if current.all_tables:
        if specs and manage:
            raise PublicationError(f"publication {name!r} is FOR ALL TABLES, which cannot have column lists or "
                                   f"row filters; drop it or remove sources.{source_id}.publication restrictions")
        return PublicationChange()
    missing = wanted_set - current.tables
    if manage:
        restricted = any(d.has_column_list or d.row_filter for d in current.details.values())
        if specs or restricted:
            return PublicationChange(set_tables=full)
        return PublicationChange(add=_sorted(missing), drop=_sorted(current.tables - wanted_set))
    if missing:
        raise PublicationError(
            f"publication {name!r} does not publish {', '.join(str(t) for t in _sorted(missing))}; run "
            f"ALTER PUBLICATION {_quote_ident(name)} ADD TABLE ..., or set "
            f"sources.{source_id}.publication.create = true")
    return PublicationChange()


def _sorted(tables: Iterable[TableId]) -> tuple[TableId, ...]:
    return tuple(sorted(tables, key=str))


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'

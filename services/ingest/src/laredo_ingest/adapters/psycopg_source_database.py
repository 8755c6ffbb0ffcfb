"""SourceDatabase over one psycopg async connection: server checks, catalog, publication, slots, snapshot COPY."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence

import psycopg
from psycopg import sql

from laredo_kernel.changes import ColumnInfo, TableId
from laredo_kernel.position import parse_lsn
from laredo_kernel.tuples import encode_tuple

from laredo_ingest.adapters.pg_connection import connect, describe_dsn, wrap_errors
from laredo_ingest.domain.baseline import chunk_tuples
from laredo_ingest.domain.errors import PublicationError, SlotInUse, SourceUnavailable
from laredo_ingest.domain.prerequisites import (
    PG15,
    PublicationChange,
    PublicationState,
    PublishedTable,
    PublishedTableSpec,
    ServerFacts,
)
from laredo_ingest.domain.schema import CatalogType, ReplicaIdentity, TableSchema, identity_key_flags, resolve_base_type
from laredo_ingest.domain.slot_retention import RetainedWal
from laredo_ingest.domain.start_plan import SlotInfo

_RELATIONS = """
SELECT n.nspname, c.relname, c.oid, c.relreplident
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND (n.nspname, c.relname) IN (SELECT * FROM unnest(%s::text[], %s::text[]))
"""
_COLUMNS = """
SELECT a.attrelid, a.attname, a.atttypid, a.atttypmod, a.attnotnull,
       coalesce((SELECT k.n FROM unnest(pk.indkey::int2[]) WITH ORDINALITY AS k(attnum, n)
                 WHERE k.attnum = a.attnum), 0)::int,
       coalesce(a.attnum = ANY (ri.indkey::int2[]), false)
FROM pg_attribute a
LEFT JOIN pg_index pk ON pk.indrelid = a.attrelid AND pk.indisprimary
LEFT JOIN pg_index ri ON ri.indrelid = a.attrelid AND ri.indisreplident
WHERE a.attrelid = ANY (%s::oid[]) AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
ORDER BY a.attrelid, a.attnum
"""
_TYPES = """
WITH RECURSIVE ty AS (
  SELECT oid, typname, typtype, typcategory, typelem, typbasetype FROM pg_type WHERE oid = ANY (%s::oid[])
  UNION
  SELECT t.oid, t.typname, t.typtype, t.typcategory, t.typelem, t.typbasetype
  FROM pg_type t JOIN ty ON t.oid = ty.typelem OR t.oid = ty.typbasetype
)
SELECT oid, typname, typtype, typcategory, typelem, typbasetype FROM ty
"""
_SLOT = """
SELECT slot_name, coalesce(plugin, ''), coalesce(database, ''), temporary, active,
       coalesce(confirmed_flush_lsn::text, '0/0'), coalesce(wal_status, ''), safe_wal_size
FROM pg_replication_slots WHERE slot_name = %s
"""
_INACTIVE_SLOTS = """
SELECT slot_name, pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint, coalesce(wal_status, '')
FROM pg_replication_slots WHERE NOT active AND restart_lsn IS NOT NULL ORDER BY slot_name
"""
_FACTS = """
SELECT current_setting('wal_level'), r.rolname, r.rolsuper, r.rolreplication,
       current_setting('server_version_num')::int,
       current_setting('max_replication_slots')::int,
       (SELECT coalesce(array_agg(slot_name::text ORDER BY slot_name), '{}') FROM pg_replication_slots),
       current_setting('max_wal_senders')::int,
       (SELECT count(*) FROM pg_stat_replication)::int
FROM pg_roles r WHERE r.rolname = current_user
"""
_PUBLISHED = """
SELECT pt.schemaname, pt.tablename, pt.attnames::text[], coalesce(pt.rowfilter, ''), pr.prattrs IS NOT NULL
FROM pg_publication_tables pt
JOIN pg_publication p ON p.pubname = pt.pubname
LEFT JOIN pg_publication_rel pr
  ON pr.prpubid = p.oid AND pr.prrelid = format('%%I.%%I', pt.schemaname, pt.tablename)::regclass
WHERE pt.pubname = %s
"""
_PUBLISHED_PG14 = "SELECT schemaname, tablename, NULL::text[], '', false FROM pg_publication_tables WHERE pubname = %s"


class PsycopgSourceDatabase:
    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._where = describe_dsn(dsn)
        self._conn: psycopg.AsyncConnection | None = None
        self._version = PG15

    async def open(self) -> None:
        self._conn = await connect(self._dsn)

    async def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.close()

    async def server_facts(self) -> ServerFacts:
        async with wrap_errors("checking the server", self._dsn):
            cur = await self._c().execute(_FACTS)
            row = await cur.fetchone()
        if row is None:
            raise SourceUnavailable(f"cannot read the role of the current user on {self._where}")
        wal_level, role, superuser, replication, version, max_slots, slots, max_senders, senders = row
        self._version = version
        return ServerFacts(self._where, role, wal_level, superuser, replication, version, max_slots,
                           tuple(slots), max_senders, senders)

    async def current_wal_lsn(self) -> int:
        async with wrap_errors("reading the current WAL position", self._dsn):
            cur = await self._c().execute("SELECT pg_current_wal_lsn()::text")
            row = await cur.fetchone()
        return parse_lsn(row[0]) if row else 0

    async def row_estimates(self, tables: Sequence[TableId]) -> Mapping[TableId, int]:
        async with wrap_errors("reading row estimates", self._dsn):
            cur = await self._c().execute(
                "SELECT n.nspname, c.relname, greatest(c.reltuples, 0)::bigint FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE (n.nspname, c.relname) IN (SELECT * FROM unnest(%s::text[], %s::text[]))",
                ([t.schema for t in tables], [t.name for t in tables]))
            return {TableId(schema, name): int(rows) for schema, name, rows in await cur.fetchall()}

    async def describe_tables(self, tables: Sequence[TableId]) -> Mapping[TableId, TableSchema]:
        async with wrap_errors("reading the catalog", self._dsn):
            cur = await self._c().execute(_RELATIONS, ([t.schema for t in tables], [t.name for t in tables]))
            relations = {oid: (TableId(schema, name), identity) for schema, name, oid, identity in await cur.fetchall()}
            cur = await self._c().execute(_COLUMNS, (list(relations),))
            column_rows = await cur.fetchall()
            cur = await self._c().execute(_TYPES, (sorted({row[2] for row in column_rows}),))
            types = {row[0]: CatalogType(*row) for row in await cur.fetchall()}
        schemas = {}
        for oid, (table, identity_code) in relations.items():
            rows = [r for r in column_rows if r[0] == oid]
            columns = tuple(ColumnInfo(name, type_oid, types[type_oid].name if type_oid in types else "", typmod,
                                       False, not_null, pk, resolve_base_type(type_oid, types))
                            for _, name, type_oid, typmod, not_null, pk, _ in rows)
            identity = ReplicaIdentity(identity_code)
            index_columns = frozenset(r[1] for r in rows if r[6])
            schemas[table] = TableSchema(table, oid, identity_key_flags(columns, identity, index_columns), identity)
        return schemas

    async def publication(self, name: str) -> PublicationState | None:
        async with wrap_errors(f"reading publication {name}", self._dsn):
            cur = await self._c().execute("SELECT puballtables FROM pg_publication WHERE pubname = %s", (name,))
            row = await cur.fetchone()
            if row is None:
                return None
            query = _PUBLISHED if self._version >= PG15 else _PUBLISHED_PG14
            cur = await self._c().execute(query, (name,))
            details = {TableId(s, t): PublishedTable(TableId(s, t), tuple(cols or ()), bool(listed), rowfilter)
                       for s, t, cols, rowfilter, listed in await cur.fetchall()}
        return PublicationState(bool(row[0]), frozenset(details), details)

    async def change_publication(self, name: str, change: PublicationChange) -> None:
        try:
            if change.set_tables and not change.create:
                await self._set_publication_tables(name, change)
                return
            for statement in _publication_statements(name, change):
                await self._c().execute(statement)
        except psycopg.OperationalError as exc:
            raise SourceUnavailable(f"changing publication {name} on {self._where}: connection lost") from exc
        except psycopg.Error as exc:
            raise PublicationError(
                f"cannot create or alter publication {name!r} on {self._where}: {exc}; grant the role ownership "
                "of the tables (and CREATE on the database), or create the publication yourself and set "
                "publication.create = false") from exc

    async def _set_publication_tables(self, name: str, change: PublicationChange) -> None:
        """SET TABLE in a transaction; rolled back when PostgreSQL's own rendering of the result equals
        what was there, so an unchanged publication is not touched (and consumers need no new baseline)."""
        before = await self.publication(name)
        conn = self._c()
        async with conn.transaction() as tx:
            await conn.execute(sql.SQL("ALTER PUBLICATION {} SET TABLE {}").format(
                sql.Identifier(name), _table_specs(change.set_tables)))
            after = await self.publication(name)
            if before is not None and after is not None and before.details == after.details:
                raise psycopg.Rollback(tx)

    async def drop_publication(self, name: str) -> None:
        async with wrap_errors(f"dropping publication {name}", self._dsn):
            await self._c().execute(sql.SQL("DROP PUBLICATION IF EXISTS {}").format(sql.Identifier(name)))

    async def slot(self, name: str) -> SlotInfo | None:
        async with wrap_errors(f"reading replication slot {name}", self._dsn):
            cur = await self._c().execute(_SLOT, (name,))
            row = await cur.fetchone()
        if row is None:
            return None
        slot_name, plugin, database, temporary, active, confirmed, wal_status, safe_wal_size = row
        return SlotInfo(slot_name, plugin, database, temporary, active, parse_lsn(confirmed), wal_status,
                        safe_wal_size)

    async def inactive_slots(self) -> Sequence[RetainedWal]:
        async with wrap_errors("reading replication slots", self._dsn):
            cur = await self._c().execute(_INACTIVE_SLOTS)
            return [RetainedWal(name, int(retained), wal_status) for name, retained, wal_status in await cur.fetchall()]

    async def drop_slot(self, name: str) -> None:
        try:
            await self._c().execute("SELECT pg_drop_replication_slot(%s)", (name,))
        except psycopg.errors.UndefinedObject:
            return
        except psycopg.errors.ObjectInUse as exc:
            raise SlotInUse(f"replication slot {name} on {self._where} is in use by another connection; "
                            "stop the other ingest instance of this source") from exc
        except psycopg.Error as exc:
            async with wrap_errors(f"dropping replication slot {name}", self._dsn):
                raise exc

    @contextlib.asynccontextmanager
    async def snapshot(self, snapshot_name: str) -> AsyncIterator[_PsycopgSnapshotReader]:
        conn = self._c()
        async with wrap_errors(f"importing snapshot {snapshot_name}", self._dsn):
            await conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            await conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(snapshot_name)))
        try:
            yield _PsycopgSnapshotReader(conn, self._dsn)
        except BaseException:
            await self.close()  # the transaction (and a COPY in progress) ends with the connection
            raise
        async with wrap_errors("ending the baseline transaction", self._dsn):
            await conn.execute("COMMIT")

    def _c(self) -> psycopg.AsyncConnection:
        if self._conn is None:
            raise SourceUnavailable(f"not connected to {self._where}: open() first")
        return self._conn


class _PsycopgSnapshotReader:
    def __init__(self, conn: psycopg.AsyncConnection, dsn: str) -> None:
        self._conn, self._dsn = conn, dsn

    async def copy_rows(self, schema: TableSchema, row_filter: str, chunk_rows: int, *,
                        chunk_bytes: int = 0) -> AsyncGenerator[list[bytes], None]:
        # Explicit columns: the same (published, non-dropped, non-generated) columns in the order pgoutput sends.
        table = schema.table
        columns = sql.SQL(", ").join(sql.Identifier(c.name) for c in schema.columns)
        source = sql.Identifier(table.schema, table.name)
        if row_filter:  # the publication's own (deparsed) filter: the baseline holds the rows the stream would
            query = sql.SQL("COPY (SELECT {} FROM {} WHERE {}) TO STDOUT").format(columns, source, sql.SQL(row_filter))
        else:
            query = sql.SQL("COPY {} ({}) TO STDOUT").format(source, columns)
        async with wrap_errors(f"copying {table}", self._dsn):
            async with self._conn.cursor().copy(query) as copy:
                tuples = (encode_tuple([None if v is None else v.encode() for v in row]) async for row in copy.rows())
                async with contextlib.aclosing(chunk_tuples(tuples, chunk_rows, chunk_bytes)) as chunks:
                    async for chunk in chunks:
                        yield chunk


def _publication_statements(name: str, change: PublicationChange) -> list[sql.Composable]:
    pub = sql.Identifier(name)
    if change.create:
        tables = _table_specs(change.set_tables) if change.set_tables else _tables(change.add)
        return [sql.SQL("CREATE PUBLICATION {} FOR TABLE {}").format(pub, tables)]
    statements: list[sql.Composable] = []
    if change.add:
        statements.append(sql.SQL("ALTER PUBLICATION {} ADD TABLE {}").format(pub, _tables(change.add)))
    if change.drop:
        statements.append(sql.SQL("ALTER PUBLICATION {} DROP TABLE {}").format(pub, _tables(change.drop)))
    return statements


def _table_specs(specs: Sequence[PublishedTableSpec]) -> sql.Composable:
    parts = []
    for spec in specs:
        part: sql.Composable = sql.Identifier(spec.table.schema, spec.table.name)
        if spec.columns:
            part = sql.SQL("{} ({})").format(part, sql.SQL(", ").join(sql.Identifier(c) for c in spec.columns))
        if spec.row_filter:  # an operator-written SQL expression from the configuration
            part = sql.SQL("{} WHERE ({})").format(part, sql.SQL(spec.row_filter))
        parts.append(part)
    return sql.SQL(", ").join(parts)


def _tables(tables: Sequence[TableId]) -> sql.Composable:
    return sql.SQL(", ").join(sql.Identifier(t.schema, t.name) for t in tables)

"""SourceDatabase over one psycopg async connection: server checks, catalog, publication, slots, snapshot COPY."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence

import psycopg
from psycopg import sql

from laredo_core.changes import ColumnInfo, TableId
from laredo_core.position import parse_lsn
from laredo_core.tuples import encode_tuple

from laredo_ingest.adapters.pg_connection import connect_error, describe_dsn, session_conninfo, wrap_errors
from laredo_ingest.domain.errors import PublicationError, SlotInUse, SourceUnavailable
from laredo_ingest.domain.prerequisites import PublicationChange, PublicationState, ServerFacts
from laredo_ingest.domain.schema import CatalogType, ReplicaIdentity, TableSchema, identity_key_flags, resolve_base_type
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
       coalesce(confirmed_flush_lsn::text, '0/0'), coalesce(wal_status, '')
FROM pg_replication_slots WHERE slot_name = %s
"""


class PsycopgSourceDatabase:
    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._where = describe_dsn(dsn)
        self._conn: psycopg.AsyncConnection | None = None
        self._schemas: dict[TableId, TableSchema] = {}

    async def open(self) -> None:
        try:
            self._conn = await psycopg.AsyncConnection.connect(session_conninfo(self._dsn), autocommit=True)
        except psycopg.OperationalError as exc:
            raise connect_error(self._dsn, exc) from exc

    async def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.close()

    async def server_facts(self) -> ServerFacts:
        async with wrap_errors("checking the server", self._dsn):
            cur = await self._c().execute(
                "SELECT current_setting('wal_level'), rolname, rolsuper, rolreplication "
                "FROM pg_roles WHERE rolname = current_user")
            wal_level, role, superuser, replication = await cur.fetchone()  # type: ignore[misc]
        return ServerFacts(self._where, role, wal_level, superuser, replication)

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
        self._schemas.update(schemas)
        return schemas

    async def publication(self, name: str) -> PublicationState | None:
        async with wrap_errors(f"reading publication {name}", self._dsn):
            cur = await self._c().execute("SELECT puballtables FROM pg_publication WHERE pubname = %s", (name,))
            row = await cur.fetchone()
            if row is None:
                return None
            cur = await self._c().execute(
                "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s", (name,))
            tables = frozenset(TableId(s, t) for s, t in await cur.fetchall())
        return PublicationState(bool(row[0]), tables)

    async def change_publication(self, name: str, change: PublicationChange) -> None:
        pub = sql.Identifier(name)
        statements = []
        if change.create:
            statements.append(sql.SQL("CREATE PUBLICATION {} FOR TABLE {}").format(pub, _tables(change.add)))
        else:
            if change.add:
                statements.append(sql.SQL("ALTER PUBLICATION {} ADD TABLE {}").format(pub, _tables(change.add)))
            if change.drop:
                statements.append(sql.SQL("ALTER PUBLICATION {} DROP TABLE {}").format(pub, _tables(change.drop)))
        try:
            for statement in statements:
                await self._c().execute(statement)
        except psycopg.OperationalError as exc:
            raise SourceUnavailable(f"changing publication {name} on {self._where}: connection lost") from exc
        except psycopg.Error as exc:
            raise PublicationError(
                f"cannot create or alter publication {name!r} on {self._where}: {exc}; grant the role ownership "
                "of the tables (and CREATE on the database), or create the publication yourself and set "
                "publication.create = false") from exc

    async def slot(self, name: str) -> SlotInfo | None:
        async with wrap_errors(f"reading replication slot {name}", self._dsn):
            cur = await self._c().execute(_SLOT, (name,))
            row = await cur.fetchone()
        if row is None:
            return None
        slot_name, plugin, database, temporary, active, confirmed, wal_status = row
        return SlotInfo(slot_name, plugin, database, temporary, active, parse_lsn(confirmed), wal_status)

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
            yield _PsycopgSnapshotReader(conn, self._schemas, self._dsn)
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
    def __init__(self, conn: psycopg.AsyncConnection, schemas: Mapping[TableId, TableSchema], dsn: str) -> None:
        self._conn, self._schemas, self._dsn = conn, schemas, dsn

    async def copy_rows(self, table: TableId, chunk_rows: int) -> AsyncGenerator[list[bytes], None]:
        # Explicit columns: the same (non-dropped, non-generated) columns in the same order as pgoutput sends.
        columns = sql.SQL(", ").join(sql.Identifier(c.name) for c in self._schemas[table].columns)
        query = sql.SQL("COPY {}.{} ({}) TO STDOUT").format(sql.Identifier(table.schema),
                                                           sql.Identifier(table.name), columns)
        chunk: list[bytes] = []
        async with wrap_errors(f"copying {table}", self._dsn):
            async with self._conn.cursor().copy(query) as copy:
                async for row in copy.rows():
                    chunk.append(encode_tuple([None if v is None else v.encode() for v in row]))
                    if len(chunk) >= chunk_rows:
                        yield chunk
                        chunk = []
        if chunk:
            yield chunk


def _tables(tables: Sequence[TableId]) -> sql.Composable:
    return sql.SQL(", ").join(sql.SQL("{}.{}").format(sql.Identifier(t.schema), sql.Identifier(t.name))
                              for t in tables)

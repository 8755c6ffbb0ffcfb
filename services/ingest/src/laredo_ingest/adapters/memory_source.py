"""An in-memory PostgreSQL source: tables, publication, slots and a WAL of pgoutput frames.

Tests build transactions with WalBuilder, commit them to a MemorySource, and read them back through
MemoryReplicationStream exactly as the psycopg adapter delivers them (CopyData frames).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import struct
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence

from laredo_kernel.changes import TableId
from laredo_kernel.tuples import RawValue, encode_tuple

from laredo_ingest.domain.baseline import chunk_tuples
from laredo_ingest.domain.errors import IngestError, ReplicationInterrupted, SlotInUse, SourceUnavailable
from laredo_ingest.domain.prerequisites import PublicationChange, PublicationState, PublishedTable, ServerFacts
from laredo_ingest.domain.schema import TableSchema
from laredo_ingest.domain.slot_retention import RetainedWal
from laredo_ingest.domain.start_plan import SlotInfo
from laredo_ingest.ports import CreatedSlot, SystemIdentity


class WalBuilder:
    """Encodes pgoutput messages and wraps them in XLogData frames with increasing LSNs."""

    def __init__(self, start_lsn: int = 0x0100_0000) -> None:
        self.lsn = start_lsn
        self._xid = 700

    @staticmethod
    def relation(schema: TableSchema) -> bytes:
        parts = [b"R", struct.pack("!I", schema.relation_id), schema.table.schema.encode() + b"\0",
                 schema.table.name.encode() + b"\0", schema.replica_identity.value.encode(),
                 struct.pack("!h", len(schema.columns))]
        for c in schema.columns:
            parts += [bytes([1 if c.is_identity_key else 0]), c.name.encode() + b"\0",
                      struct.pack("!Ii", c.type_oid, c.type_modifier)]
        return b"".join(parts)

    @staticmethod
    def insert(relation_id: int, values: Sequence[RawValue]) -> bytes:
        return b"I" + struct.pack("!I", relation_id) + b"N" + encode_tuple(list(values))

    @staticmethod
    def update(relation_id: int, new: Sequence[RawValue], old: Sequence[RawValue] | None = None,
               key_only: bool = True) -> bytes:
        head = b"U" + struct.pack("!I", relation_id)
        if old is not None:
            head += (b"K" if key_only else b"O") + encode_tuple(list(old))
        return head + b"N" + encode_tuple(list(new))

    @staticmethod
    def delete(relation_id: int, old: Sequence[RawValue], key_only: bool = True) -> bytes:
        return b"D" + struct.pack("!I", relation_id) + (b"K" if key_only else b"O") + encode_tuple(list(old))

    @staticmethod
    def truncate(relation_ids: Sequence[int], options: int = 0) -> bytes:
        return b"T" + struct.pack(f"!iB{len(relation_ids)}I", len(relation_ids), options, *relation_ids)

    def transaction(self, messages: Sequence[bytes]) -> tuple[list[bytes], int]:
        """Frames of one committed transaction (Begin, messages, Commit) and its end LSN."""
        self._xid += 1
        start = self.lsn
        commit_lsn = start + 0x40 * (len(messages) + 1)
        end_lsn = commit_lsn + 0x30
        frames = [self.frame(b"B" + struct.pack("!QqI", commit_lsn, 1_000_000, self._xid), start)]
        frames += [self.frame(m, start + 0x40 * (i + 1)) for i, m in enumerate(messages)]
        frames.append(self.frame(b"C" + struct.pack("!BQQq", 0, commit_lsn, end_lsn, 1_000_000), commit_lsn))
        self.lsn = end_lsn
        return frames, end_lsn

    @staticmethod
    def frame(message: bytes, lsn: int) -> bytes:
        return b"w" + struct.pack("!QQq", lsn, lsn, 0) + message

    @staticmethod
    def keepalive(wal_end: int, reply_requested: bool = False) -> bytes:
        return b"k" + struct.pack("!QqB", wal_end, 0, 1 if reply_requested else 0)


@dataclasses.dataclass
class MemorySource:
    """The fake server's state, shared by its database and replication adapters."""

    database: str = "test"
    system_identifier: str = "7000000000000000001"
    facts: ServerFacts = ServerFacts("memory/test", "postgres", "logical", True, True)
    tables: dict[TableId, TableSchema] = dataclasses.field(default_factory=dict)
    rows: dict[TableId, list[list[RawValue]]] = dataclasses.field(default_factory=dict)
    publications: dict[str, PublicationState] = dataclasses.field(default_factory=dict)
    slots: dict[str, SlotInfo] = dataclasses.field(default_factory=dict)
    #: The WAL as (lsn, frames): a committed transaction (lsn = its end) or a keepalive (lsn = wal end).
    feed: list[tuple[int, list[bytes]]] = dataclasses.field(default_factory=list)
    status_updates: list[tuple[int, int, int]] = dataclasses.field(default_factory=list)
    unreachable: bool = False
    wal: WalBuilder = dataclasses.field(default_factory=WalBuilder)
    _snapshots: dict[str, dict[TableId, list[list[RawValue]]]] = dataclasses.field(default_factory=dict)
    _changed: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    _generation: int = 0  # bumped by break_streams()

    def add_table(self, schema: TableSchema, rows: Sequence[Sequence[RawValue]] = ()) -> None:
        self.tables[schema.table] = schema
        self.rows[schema.table] = [list(r) for r in rows]

    def commit(self, messages: Sequence[bytes]) -> int:
        frames, end_lsn = self.wal.transaction(messages)
        self.feed.append((end_lsn, frames))
        self._wake()
        return end_lsn

    def send_keepalive(self, reply_requested: bool = False) -> None:
        self.feed.append((self.wal.lsn, [self.wal.keepalive(self.wal.lsn, reply_requested)]))
        self._wake()

    def break_streams(self) -> None:
        """Every open replication stream fails on its next read, as if the connection dropped."""
        self._generation += 1
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _check_reachable(self) -> None:
        if self.unreachable:
            raise SourceUnavailable(f"cannot connect to PostgreSQL at {self.facts.where}: unreachable (test fault)")


class _MemorySnapshotReader:
    def __init__(self, rows: Mapping[TableId, list[list[RawValue]]]) -> None:
        self._rows = rows

    async def copy_rows(self, schema: TableSchema, row_filter: str, chunk_rows: int, *,
                        chunk_bytes: int = 0) -> AsyncGenerator[list[bytes], None]:
        """Row filters are SQL, which this fake does not evaluate: it only accepts none."""
        if row_filter:
            raise IngestError(f"the in-memory source cannot evaluate row filter {row_filter!r}")
        async for chunk in chunk_tuples(self._tuples(schema.table), chunk_rows, chunk_bytes):
            yield chunk
            await asyncio.sleep(0)

    async def _tuples(self, table: TableId) -> AsyncIterator[bytes]:
        for row in self._rows.get(table, []):
            yield encode_tuple(row)


class MemorySourceDatabase:
    def __init__(self, source: MemorySource) -> None:
        self._source = source

    async def open(self) -> None:
        self._source._check_reachable()

    async def close(self) -> None:
        pass

    async def server_facts(self) -> ServerFacts:
        return self._source.facts

    async def describe_tables(self, tables: Sequence[TableId]) -> Mapping[TableId, TableSchema]:
        return {t: self._source.tables[t] for t in tables if t in self._source.tables}

    async def publication(self, name: str) -> PublicationState | None:
        """Like pg_publication_tables: every published table with its published columns."""
        state = self._source.publications.get(name)
        if state is None:
            return None
        details = {t: state.details.get(t) or PublishedTable(
            t, tuple(c.name for c in self._source.tables[t].columns) if t in self._source.tables else ())
            for t in state.tables}
        return dataclasses.replace(state, details=details)

    async def change_publication(self, name: str, change: PublicationChange) -> None:
        current = self._source.publications.get(name)
        tables = set() if current is None or change.create else set(current.tables)
        tables |= set(change.add)
        tables -= set(change.drop)
        details = {}
        if change.set_tables:
            tables = {spec.table for spec in change.set_tables}
            details = {spec.table: PublishedTable(spec.table, spec.columns, bool(spec.columns), spec.row_filter)
                       for spec in change.set_tables if spec.columns or spec.row_filter}
        self._source.publications[name] = PublicationState(False, frozenset(tables), details)

    async def drop_publication(self, name: str) -> None:
        self._source.publications.pop(name, None)

    async def current_wal_lsn(self) -> int:
        return self._source.wal.lsn

    async def row_estimates(self, tables: Sequence[TableId]) -> Mapping[TableId, int]:
        return {t: len(self._source.rows.get(t, [])) for t in tables}

    async def slot(self, name: str) -> SlotInfo | None:
        return self._source.slots.get(name)

    async def inactive_slots(self) -> Sequence[RetainedWal]:
        lsn = self._source.wal.lsn
        return [RetainedWal(s.name, max(lsn - s.confirmed_flush_lsn, 0), s.wal_status)
                for s in self._source.slots.values() if not s.active]

    async def drop_slot(self, name: str) -> None:
        slot = self._source.slots.get(name)
        if slot is not None and slot.active:
            raise SlotInUse(f"replication slot {name} is active")
        self._source.slots.pop(name, None)

    @contextlib.asynccontextmanager
    async def snapshot(self, snapshot_name: str) -> AsyncIterator[_MemorySnapshotReader]:
        rows = self._source._snapshots.pop(snapshot_name, None)
        if rows is None:
            raise IngestError(f"snapshot {snapshot_name!r} does not exist or was already used")
        yield _MemorySnapshotReader(rows)


class MemoryReplicationStream:
    def __init__(self, source: MemorySource) -> None:
        self._source = source
        self._slot: str | None = None
        self._next = 0  # index into source.feed
        self._generation = source._generation
        self._streaming = False
        self._temporary: str | None = None

    async def open(self) -> SystemIdentity:
        self._source._check_reachable()
        return SystemIdentity(self._source.system_identifier, self._source.database)

    async def create_slot(self, name: str, *, temporary: bool) -> CreatedSlot:
        src = self._source
        if name in src.slots:
            raise IngestError(f'replication slot "{name}" already exists')
        lsn = src.wal.lsn
        src.slots[name] = SlotInfo(name, "pgoutput", src.database, temporary, temporary, lsn)
        self._temporary = name if temporary else None
        snapshot = f"snap-{name}-{lsn:X}"
        src._snapshots[snapshot] = {t: [list(r) for r in rows] for t, rows in src.rows.items()}
        return CreatedSlot(name, lsn, snapshot)

    async def start(self, slot: str, start_lsn: int, publication: str, *, protocol_version: int = 1,
                    streaming: bool = False) -> None:
        info = self._source.slots.get(slot)
        if info is None:
            raise ReplicationInterrupted(f'replication slot "{slot}" does not exist')
        if info.active and slot != self._temporary:
            raise SlotInUse(f"replication slot {slot} is active")
        self._source.slots[slot] = dataclasses.replace(info, active=True)
        position = max(start_lsn, info.confirmed_flush_lsn)
        self._next = next((i for i, (lsn, _) in enumerate(self._source.feed) if lsn > position),
                          len(self._source.feed))
        self._slot, self._streaming = slot, True

    async def read_frames(self, max_frames: int) -> Sequence[bytes | memoryview]:
        src = self._source
        while True:
            if src._generation != self._generation or not self._streaming:
                raise ReplicationInterrupted("replication connection lost (test fault)")
            if self._next < len(src.feed):
                _, frames = src.feed[self._next]
                self._next += 1
                return frames
            await src._changed.wait()

    async def send_status(self, write_lsn: int, flush_lsn: int, apply_lsn: int, *,
                          reply_requested: bool = False) -> None:
        src = self._source
        if src._generation != self._generation:
            raise ReplicationInterrupted("replication connection lost (test fault)")
        src.status_updates.append((write_lsn, flush_lsn, apply_lsn))
        info = src.slots.get(self._slot or "")
        if info is not None and flush_lsn > info.confirmed_flush_lsn:
            src.slots[info.name] = dataclasses.replace(info, confirmed_flush_lsn=flush_lsn)

    async def stop(self) -> None:
        self._streaming = False

    async def close(self) -> None:
        self._streaming = False
        src = self._source
        if self._temporary is not None:
            src.slots.pop(self._temporary, None)
        elif self._slot is not None and self._slot in src.slots:
            src.slots[self._slot] = dataclasses.replace(src.slots[self._slot], active=False)
        self._slot = self._temporary = None

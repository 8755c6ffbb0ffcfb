"""Test helpers for the snapshot service: stream messages of one table, decoding, rows and snapshots."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import nats
from laredo_testing import stream
from laredo_testing.stream import truncate as truncate

from laredo.stream.v1 import change_stream_pb2 as spb
from laredo_kernel.changes import ChangeBatchInfo, ColumnInfo, TableId
from laredo_kernel.position import Position
from laredo_core.snapshots.format import SnapshotManifest, decode_part
from laredo_core.snapshots.store import SnapshotStore
from laredo_core.stream import naming
from laredo_core.stream.codec import columns_to_proto, decode_batch
from laredo_kernel.tuples import UNCHANGED as UNCHANGED

TABLE = TableId("public", "items")
SOURCE = "pg"
COLUMNS = (
    ColumnInfo("id", 20, "int8", is_identity_key=True, not_null=True, primary_key_ordinal=1),
    ColumnInfo("name", 25, "text"),
    ColumnInfo("note", 25, "text"),
)


@dataclass
class Batches(stream.Batches):
    """Serialized ChangeBatch messages for TABLE as ingest publishes them."""

    table: TableId = TABLE
    columns: tuple[ColumnInfo, ...] = COLUMNS

    def chunks(self, *chunks: Sequence[spb.Change]) -> list[bytes]:
        """One transaction published as several messages (chunks); only the last has last_chunk."""
        self.lsn += 0x100
        self.xid += 1
        out, ordinal = [], 0
        for index, changes in enumerate(chunks):
            for change in changes:
                change.ordinal = ordinal
                ordinal += 1
            last = index == len(chunks) - 1
            out.append(self._batch(spb.BATCH_KIND_TRANSACTION, commit_lsn=self.lsn, xid=self.xid, chunk=index,
                                   last_chunk=last, end_lsn=self.lsn + 0x30 if last else 0,
                                   changes=list(changes)).SerializeToString())
        return out

    def baseline_begin_and_rows(self, rows: Sequence[Mapping[str, Any]], *, chunk_rows: int = 100) -> list[bytes]:
        """A baseline whose END has not been published (yet)."""
        return self.baseline(rows, chunk_rows=chunk_rows)[:-1]

    def schema_change(self, columns: tuple[ColumnInfo, ...]) -> bytes:
        old, self.columns = self.columns, columns
        self.lsn += 0x100
        return spb.ChangeBatch(
            source_id=self.source_id, kind=spb.BATCH_KIND_SCHEMA_CHANGE,
            table=spb.TableRef(schema=self.table.schema, name=self.table.name, relation_id=16384),
            columns=columns_to_proto(columns), old_columns=columns_to_proto(old),
            commit_lsn=self.lsn, reason="ALTER TABLE").SerializeToString()

    def end_without_rows(self) -> bytes:
        """A BASELINE_END of a baseline whose BEGIN and rows never reached the stream."""
        self.lsn += 0x100
        return self._batch(spb.BATCH_KIND_BASELINE_END, commit_lsn=self.lsn, baseline_id="lost",
                           last_chunk=True).SerializeToString()


insert, update, delete = Batches().insert, Batches().update, Batches().delete


def row(i: int, name: str | None = None, note: Any = "n") -> dict[str, Any]:
    return {"id": i, "name": name if name is not None else f"r{i}", "note": note}


def decoded(messages: Iterable[bytes], first_sequence: int = 1) -> list[tuple[int, ChangeBatchInfo]]:
    """(stream sequence, decoded batch with JSON-compatible values), sequences counting from first_sequence."""
    return [(first_sequence + i, decode_batch(m, json_values=True)) for i, m in enumerate(messages)]


def by_key(rows: Iterable[Mapping[str, Any]], key: str = "id") -> dict[Any, dict[str, Any]]:
    out = {}
    for r in rows:
        assert r[key] not in out, f"two rows with {key} {r[key]}"
        out[r[key]] = dict(r)
    return out


async def stored_rows(store: SnapshotStore, manifest: SnapshotManifest) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for part in manifest.parts:
        data = await store.read_part(manifest.table, manifest.snapshot_id, part.name)
        rows += decode_part(manifest.format, data, part.name)
    return rows


def position(text: str) -> Position:
    return Position.parse(text)


def canonical(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """Rows as sorted JSON texts with their keys in order: compares rows and the order of their columns."""
    return sorted(json.dumps(r) for r in rows)


@dataclass
class Stream:
    """The JetStream stream of one test (named as ingest names it); publish() returns the stream sequences."""

    js: Any
    prefix: str

    @property
    def name(self) -> str:
        return naming.stream_name(self.prefix, SOURCE)

    async def publish(self, *messages: bytes | list[bytes], table: TableId = TABLE) -> list[int]:
        subject = naming.table_subject(self.prefix, SOURCE, table)
        sequences = []
        for message in messages:
            for data in message if isinstance(message, list) else [message]:
                sequences.append((await self.js.publish(subject, data)).seq)
        return sequences


@contextlib.asynccontextmanager
async def jetstream(nats_url: str, prefix: str) -> AsyncIterator[Stream]:
    """A fresh stream for `prefix` (deleted afterwards)."""
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    stream = Stream(js, prefix)
    await js.add_stream(name=stream.name, subjects=[naming.source_subject_filter(prefix, SOURCE)])
    try:
        yield stream
    finally:
        with contextlib.suppress(Exception):
            await js.delete_stream(stream.name)
        await nc.close()

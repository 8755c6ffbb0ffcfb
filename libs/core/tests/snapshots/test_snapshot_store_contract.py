"""The SnapshotStore contract, run against the in-memory fake, a local directory and S3 (moto's server)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from minio import Minio

from laredo_kernel.changes import ColumnInfo, TableId
from laredo_core.snapshots.errors import SnapshotNotFound, SnapshotStoreUnavailable
from laredo_core.snapshots.format import MANIFEST_NAME, Checksum, SnapshotManifest, encode_part
from laredo_core.snapshots.local_store import LocalSnapshotStore
from laredo_core.snapshots.memory_store import MemorySnapshotStore
from laredo_core.snapshots.s3_store import S3Location, S3SnapshotStore
from laredo_core.snapshots.store import SnapshotStore

TABLE = TableId("public", "items")
OTHER = TableId("public", "other table")
ODD = TableId("my schema", "a/b.c")
COLUMNS = (ColumnInfo("id", 23, "int4", is_identity_key=True, not_null=True, primary_key_ordinal=1),
           ColumnInfo("name", 25, "text"), ColumnInfo("doc", 25, "text"))


@pytest.fixture(params=["memory", "local", pytest.param("s3", marks=pytest.mark.integration)])
def store(request: pytest.FixtureRequest, tmp_path: Path, unique_name: str) -> Iterator[SnapshotStore]:
    if request.param == "memory":
        yield MemorySnapshotStore()
    elif request.param == "local":
        yield LocalSnapshotStore(tmp_path / "snapshots")
    else:
        endpoint = request.getfixturevalue("s3_endpoint")
        yield S3SnapshotStore(S3Location(endpoint.endpoint, unique_name, "fanout/snaps", endpoint.access_key,
                                         endpoint.secret_key, endpoint.region, endpoint.secure))


async def write(store: SnapshotStore, snapshot_id: str, created_at: float, rows: list[dict[str, object]],
                table: TableId = TABLE, manifest: bool = True, user_meta: dict[str, object] | None = None
                ) -> SnapshotManifest:
    checksum, parts = Checksum(), []
    for index, start in enumerate(range(0, max(len(rows), 1), 2)):
        part, data = encode_part(index, rows[start:start + 2])
        checksum.update(data)
        await store.write_part(table, snapshot_id, part.name, data)
        parts.append(part)
    result = SnapshotManifest(snapshot_id, table, COLUMNS, ("id",), len(rows), "0/10:3", 42, 7, created_at,
                              tuple(parts), checksum.value, source_id="pg", user_meta=user_meta or {})
    if manifest:
        await store.write_manifest(result)
    return result


async def test_a_snapshot_is_listed_newest_first_and_read_back(store: SnapshotStore) -> None:
    rows = [{"id": i, "name": f"n{i}", "doc": None} for i in range(5)]
    older = await write(store, "s-older", 1_700_000_000.0, rows[:1])
    newer = await write(store, "s-newer", 1_700_000_100.5, rows)
    assert [m.snapshot_id for m in await store.list_snapshots(TABLE)] == ["s-newer", "s-older"]
    assert await store.read_manifest(TABLE, "s-newer") == newer
    assert await store.read_manifest(TABLE, "s-older") == older
    assert [p.rows for p in newer.parts] == [2, 2, 1]
    data = b"".join([await store.read_part(TABLE, "s-newer", p.name) for p in newer.parts])
    assert data.decode().splitlines()[0] == '{"id":0,"name":"n0","doc":null}'
    assert await store.list_snapshots(OTHER) == []


async def test_only_snapshots_with_a_manifest_exist(store: SnapshotStore) -> None:
    await write(store, "s-half", 1_700_000_000.0, [{"id": 1}], manifest=False)
    assert await store.list_snapshots(TABLE) == []
    assert await store.read_manifest(TABLE, "s-half") is None
    assert await store.read_manifest(TABLE, "unknown") is None
    with pytest.raises(SnapshotNotFound):
        await store.read_part(TABLE, "unknown", "rows-00000.jsonl")


async def test_delete_removes_a_snapshot_and_tolerates_missing_ones(store: SnapshotStore) -> None:
    kept = await write(store, "s-kept", 1_700_000_000.0, [{"id": 1}])
    await write(store, "s-gone", 1_700_000_001.0, [{"id": 2}])
    await store.delete_snapshot(TABLE, "s-gone")
    await store.delete_snapshot(TABLE, "s-never-was")
    assert await store.list_snapshots(TABLE) == [kept]
    with pytest.raises(SnapshotNotFound):
        await store.read_part(TABLE, "s-gone", "rows-00000.jsonl")


async def test_tables_with_unusual_names_are_kept_apart(store: SnapshotStore) -> None:
    await write(store, "s-1", 1_700_000_000.0, [{"id": 1}], table=OTHER)
    await write(store, "s-1", 1_700_000_000.0, [{"id": 2}, {"id": 3}], table=TABLE)
    (other,) = await store.list_snapshots(OTHER)
    (mine,) = await store.list_snapshots(TABLE)
    assert (other.table, other.row_count, mine.row_count) == (OTHER, 1, 2)


async def test_an_unreadable_manifest_is_left_out(store: SnapshotStore, tmp_path: Path, unique_name: str,
                                                  request: pytest.FixtureRequest) -> None:
    good = await write(store, "s-good", 1_700_000_000.0, [{"id": 1}])
    await write(store, "s-bad", 1_700_000_001.0, [{"id": 1}])
    broken = b'{"format": "jsonl", "snapshot_id": "s-bad"'
    if isinstance(store, MemorySnapshotStore):
        store._manifests[(TABLE, "s-bad")] = broken  # noqa: SLF001 - the fake's storage is the file
    elif isinstance(store, LocalSnapshotStore):
        (tmp_path / "snapshots" / "public.items" / "s-bad" / MANIFEST_NAME).write_bytes(broken)
    else:
        endpoint = request.getfixturevalue("s3_endpoint")
        client = Minio(endpoint.endpoint, endpoint.access_key, endpoint.secret_key, secure=endpoint.secure,
                       region=endpoint.region)
        client.put_object(unique_name, f"fanout/snaps/public.items/s-bad/{MANIFEST_NAME}", io.BytesIO(broken),
                          len(broken))
    assert await store.list_snapshots(TABLE) == [good]


async def test_list_tables_names_every_table_with_snapshots(store: SnapshotStore, tmp_path: Path) -> None:
    assert await store.list_tables() == []
    await write(store, "s-1", 1_700_000_000.0, [{"id": 1}])
    await write(store, "s-2", 1_700_000_001.0, [{"id": 1}], table=ODD)
    await write(store, "s-3", 1_700_000_002.0, [{"id": 1}], table=OTHER)
    await write(store, "s-4", 1_700_000_003.0, [{"id": 1}], table=OTHER)
    if isinstance(store, LocalSnapshotStore):
        (tmp_path / "snapshots" / "not-a-table").mkdir()  # what the store did not write is ignored
        (tmp_path / "snapshots" / "notes.txt").write_text("hello")
    assert sorted(await store.list_tables(), key=str) == sorted([ODD, OTHER, TABLE], key=str)
    (found,) = await store.list_snapshots(ODD)
    assert (found.table, found.snapshot_id) == (ODD, "s-2")


async def test_user_meta_is_kept_with_the_manifest(store: SnapshotStore) -> None:
    meta = {"reason": "before upgrade", "ticket": 42, "nested": {"ok": True, "tags": ["a", None]}}
    written = await write(store, "s-meta", 1_700_000_000.0, [{"id": 1}], user_meta=meta)
    await write(store, "s-plain", 1_700_000_001.0, [{"id": 2}])
    assert (await store.read_manifest(TABLE, "s-meta")) == written
    assert {m.snapshot_id: dict(m.user_meta) for m in await store.list_snapshots(TABLE)} == {
        "s-meta": meta, "s-plain": {}}


async def test_failures_raise_snapshot_store_unavailable(tmp_path: Path) -> None:
    memory = MemorySnapshotStore()
    memory.unavailable = True
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    s3 = S3SnapshotStore(S3Location("127.0.0.1:9", "bucket", access_key="k", secret_key="s", secure=False, retries=0))
    for store in (memory, LocalSnapshotStore(blocked), s3):
        with pytest.raises(SnapshotStoreUnavailable):
            await store.write_part(TABLE, "s-1", "rows-00000.jsonl", b"{}\n")
        with pytest.raises(SnapshotStoreUnavailable):
            await store.list_tables()

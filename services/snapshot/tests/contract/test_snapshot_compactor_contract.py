"""The Compactor port: the same contract for the Spark compactor and the sequential one (real NATS, local store).

Every case of the fold specification is compacted from nothing; some onto a base snapshot; and the failure
modes of the contract (damaged base, gap in the stream, nothing new) behave alike.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from services.snapshot.tests.fold_spec import FoldCase, fold_cases
from services.snapshot.tests.snapshot_testkit import (
    SOURCE,
    TABLE,
    Batches,
    Stream,
    by_key,
    canonical,
    delete,
    insert,
    jetstream,
    row,
    stored_rows,
    truncate,
    update,
)

from laredo_core.snapshots.config import StoreConfig
from laredo_core.snapshots.errors import SnapshotCorrupt
from laredo_core.snapshots.factory import SnapshotStores
from laredo_core.snapshots.format import SnapshotManifest, table_directory
from laredo_core.stream.nats_tail import NatsStreamTail
from laredo_snapshot.adapters.memory import RecordingObserver
from laredo_snapshot.adapters.nats_stream_bounds import NatsStreamBounds
from laredo_snapshot.adapters.sequential_compactor import SequentialCompactor
from laredo_snapshot.domain.errors import TailGap
from laredo_snapshot.domain.jobs import CompactionJob, manifest_for
from laredo_snapshot.ports import Compactor

pytestmark = pytest.mark.integration


@dataclass
class World:
    stream: Stream
    compactor: Compactor
    store_config: StoreConfig
    stores: SnapshotStores
    bounds: NatsStreamBounds
    observer: RecordingObserver

    @property
    def store(self) -> Any:
        return self.stores.store_for(self.store_config)

    async def job(self, name: str, base: SnapshotManifest | None = None, fmt: str = "jsonl") -> CompactionJob:
        bounds = await self.bounds.bounds(SOURCE, TABLE)
        after = base.stream_sequence if base is not None else 0
        return CompactionJob(TABLE, SOURCE, self.store_config, name, base, max(after, bounds.first_sequence - 1),
                             bounds.table_last_sequence, bounds.stream, bounds.first_sequence > after + 1, part_rows=3,
                             format=fmt)

    async def compact(self, name: str, base: SnapshotManifest | None = None, fmt: str = "jsonl",
                      compactor: Compactor | None = None) -> SnapshotManifest | None:
        job = await self.job(name, base, fmt)
        result = await (compactor or self.compactor).compact(job)
        if result is None:
            return None
        manifest = manifest_for(job, result, 1_800_000_000.0 + len(name))
        await self.store.write_manifest(manifest)
        return manifest


@pytest.fixture(params=["sequential", "spark"])
async def world(request: pytest.FixtureRequest, nats_url: str, unique_name: str, tmp_path: Path
                ) -> AsyncIterator[World]:
    stores, observer = SnapshotStores(), RecordingObserver()
    tail = NatsStreamTail([nats_url], unique_name, json_values=True)
    compactor: Compactor = SequentialCompactor(tail, stores.store_for, observer)
    if request.param == "spark":
        from laredo_snapshot.adapters.pyspark_compactor import PysparkCompactor
        from laredo_snapshot.adapters.spark_tasks import NatsTailOpener

        sessions = request.getfixturevalue("spark_sessions")
        compactor = PysparkCompactor(sessions, NatsTailOpener((nats_url,), unique_name), stores.store_for,
                                     compactor, observer, partitions=2, direct_min_rows=0)
    bounds = NatsStreamBounds([nats_url], unique_name)
    async with jetstream(nats_url, unique_name) as stream:
        yield World(stream, compactor, StoreConfig(path=str(tmp_path / "snapshots")), stores, bounds, observer)
    await bounds.aclose()
    await tail.aclose()


async def test_every_case_of_the_specification_from_nothing(world: World) -> None:
    async def check(number: int, case: FoldCase) -> None:
        async with jetstream(world.stream.js._nc.connected_url.geturl(), f"{world.stream.prefix}c{number}") as stream:
            await _check_case(world, stream, case, f"case{number}")

    # Concurrently: Spark runs the jobs of several compactions at once (each case has its own compactor).
    await asyncio.gather(*(check(number, case) for number, case in enumerate(fold_cases())))


async def _check_case(world: World, stream: Stream, case: FoldCase, name: str) -> None:
    prefix = stream.prefix
    compactor = _for_prefix(world, prefix)
    sequences = await stream.publish(case.messages)
    bounds = NatsStreamBounds([world.stream.js._nc.connected_url.geturl()], prefix)
    try:
        facts = await bounds.bounds(SOURCE, TABLE)
        job = CompactionJob(TABLE, SOURCE, world.store_config, name, None, 0, facts.table_last_sequence, facts.stream,
                            part_rows=3)
        result = await compactor.compact(job)
    finally:
        await bounds.aclose()
    assert result is not None, case.name
    manifest = manifest_for(job, result, 1_800_000_000.0)
    rows = await stored_rows(world.store, manifest)
    assert canonical(rows) == canonical(case.expected.values()), case.name
    assert result.stream_sequence == sequences[(case.last_sequence or len(sequences)) - 1], case.name
    assert result.row_count == len(case.expected) == sum(p.rows for p in result.parts), case.name
    if not case.sequential and not isinstance(compactor, SequentialCompactor):
        assert result.engine == "spark", case.name
    if case.sequential:
        assert result.engine == "sequential", case.name
        assert result.sequential_reason or isinstance(compactor, SequentialCompactor), case.name
    if case.columns:
        assert result.columns == case.columns


def _for_prefix(world: World, prefix: str) -> Compactor:
    """The world's compactor reading another stream (each case has its own)."""
    compactor = world.compactor
    url = world.stream.js._nc.connected_url.geturl()
    sequential = SequentialCompactor(NatsStreamTail([url], prefix, json_values=True), world.stores.store_for,
                                     world.observer)
    if isinstance(compactor, SequentialCompactor):
        return sequential
    from laredo_snapshot.adapters.pyspark_compactor import PysparkCompactor
    from laredo_snapshot.adapters.spark_tasks import NatsTailOpener

    return PysparkCompactor(compactor._sessions, NatsTailOpener((url,), prefix), world.stores.store_for, sequential,
                            world.observer, partitions=2, direct_min_rows=0)


async def test_a_base_snapshot_plus_the_tail(world: World) -> None:
    b = Batches()
    await world.stream.publish(b.baseline([row(i, note=f"big{i}") for i in range(1, 11)], chunk_rows=4))
    base = await world.compact("base")
    assert base is not None and base.row_count == 10 and len(base.parts) >= 2
    await world.stream.publish(b.transaction(update(row(3, "three", note=update_unchanged())), insert(row(11))),
                               b.transaction(update(row(30, "moved"), old_key={"id": 4})))
    manifest = await world.compact("next", base)
    assert manifest is not None and manifest.stream_sequence > base.stream_sequence
    rows = {r["id"]: r for r in await stored_rows(world.store, manifest)}
    assert set(rows) == {1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 30}
    assert rows[3] == row(3, "three", note="big3") and rows[30] == row(30, "moved")
    if not isinstance(world.compactor, SequentialCompactor):  # the same without writing any row directly
        grouped_only = replace_direct_min_rows(world, 10**9)
        job = await world.job("grouped", base)
        result = await grouped_only.compact(job)
        assert result is not None and result.parts
        again = manifest_for(job, result, 1_800_000_100.0)
        assert {r["id"]: r for r in await stored_rows(world.store, again)} == rows
    data = b"".join([await world.store.read_part(TABLE, "next", p.name) for p in manifest.parts])
    assert manifest.checksum == "sha256:" + hashlib.sha256(data).hexdigest()
    phases = world.observer.names()
    assert "snapshot.read_tail" in phases and "snapshot.fold" in phases


async def test_parquet_snapshots_and_a_change_of_format_either_way(world: World) -> None:
    """JSON lines → Parquet → JSON lines → Parquet, directly written rows and folded ones, then an empty table:
    each snapshot is in the format asked for and holds the rows the fold gives."""
    b = Batches()
    await world.stream.publish(b.baseline([row(i, note=f"big{i}") for i in range(1, 11)], chunk_rows=4))
    jsonl = await world.compact("jsonl", fmt="jsonl")
    await world.stream.publish(b.transaction(update(row(3, "three", note=update_unchanged())), insert(row(11))),
                               b.transaction(update(row(30, "moved"), old_key={"id": 4})))
    parquet = await world.compact("parquet", jsonl, fmt="parquet")
    assert parquet is not None and parquet.format == "parquet"
    assert parquet.parts and all(p.name.endswith(".parquet") for p in parquet.parts)
    expected = {r["id"]: r for r in [row(i, note=f"big{i}") for i in (1, 2, 5, 6, 7, 8, 9, 10)]}
    expected |= {3: row(3, "three", note="big3"), 11: row(11), 30: row(30, "moved")}
    assert by_key(await stored_rows(world.store, parquet)) == expected
    first = pq.read_table(io.BytesIO(await world.store.read_part(TABLE, "parquet", parquet.parts[0].name)))
    assert first.schema.field("id").type == pa.int64() and first.schema.field("note").type == pa.string()

    await world.stream.publish(b.transaction(delete({"id": 5}), insert(row(12))))
    grouped = replace_direct_min_rows(world, 10**9) if not isinstance(world.compactor, SequentialCompactor) else None
    back = await world.compact("back", parquet, fmt="jsonl", compactor=grouped)  # a Parquet base, folded by key
    assert back is not None and back.format == "jsonl" and all(p.name.endswith(".jsonl") for p in back.parts)
    expected = {k: v for k, v in expected.items() if k != 5} | {12: row(12)}
    assert by_key(await stored_rows(world.store, back)) == expected
    await world.stream.publish(b.transaction(insert(row(13))))
    again = await world.compact("again", back, fmt="parquet")  # untouched base rows written as they are
    assert again is not None and by_key(await stored_rows(world.store, again)) == expected | {13: row(13)}
    await world.stream.publish(b.transaction(delete({"id": 1})))
    fourth = await world.compact("fourth", again, fmt="parquet")  # the same from a Parquet base
    expected = {k: v for k, v in expected.items() if k != 1} | {13: row(13)}
    assert fourth is not None and by_key(await stored_rows(world.store, fourth)) == expected
    if not isinstance(world.compactor, SequentialCompactor):  # Spark reads the parts as they are, typed
        directory = Path(world.store_config.path) / table_directory(TABLE) / "fourth"
        frame = world.compactor._sessions.get().read.parquet(str(directory / "rows-*.parquet"))
        assert dict(frame.dtypes)["id"] == "bigint" and dict(frame.dtypes)["name"] == "string"
        assert sorted(r["id"] for r in frame.select("id").collect()) == sorted(expected)

    await world.stream.publish(b.transaction(truncate()))
    empty = await world.compact("empty", fourth, fmt="parquet")
    assert empty is not None and empty.row_count == 0 and len(empty.parts) == 1
    assert await stored_rows(world.store, empty) == []
    data = await world.store.read_part(TABLE, "empty", empty.parts[0].name)
    assert pq.read_table(io.BytesIO(data)).schema.names[:3] == ["id", "name", "note"]


def replace_direct_min_rows(world: World, rows: int) -> Compactor:
    from laredo_snapshot.adapters.pyspark_compactor import PysparkCompactor

    spark = world.compactor
    assert isinstance(spark, PysparkCompactor)
    return PysparkCompactor(spark._sessions, spark._tail, world.stores.store_for, spark._sequential, world.observer,
                            partitions=2, direct_min_rows=rows)


def update_unchanged() -> Any:
    from laredo_kernel.tuples import UNCHANGED

    return UNCHANGED


async def test_nothing_new_after_the_base_gives_none(world: World) -> None:
    b = Batches()
    await world.stream.publish(b.baseline([row(1)]))
    base = await world.compact("base")
    assert base is not None
    await world.stream.publish(b.baseline_begin_and_rows([row(2)]))  # an unfinished baseline only
    assert await world.compact("again", base) is None


async def test_a_damaged_base_raises_snapshot_corrupt(world: World) -> None:
    b = Batches()
    await world.stream.publish(b.baseline([row(i) for i in range(1, 5)]))
    base = await world.compact("base")
    assert base is not None
    await world.stream.publish(b.transaction(insert(row(9))))
    damaged = replace(base, parts=(replace(base.parts[0], sha256="0" * 64), *base.parts[1:]))
    with pytest.raises(SnapshotCorrupt):
        await world.compact("next", damaged)


async def test_a_gap_without_a_new_baseline_raises_tail_gap(world: World, nats_url: str) -> None:
    b = Batches()
    await world.stream.publish(b.baseline([row(1), row(2)]))
    base = await world.compact("base")
    assert base is not None
    await world.stream.publish(b.transaction(insert(row(3))), b.transaction(insert(row(4))))
    await world.stream.js.purge_stream(world.stream.name, seq=base.stream_sequence + 2)  # the first change is gone
    with pytest.raises(TailGap):
        await world.compact("next", base)
    await world.stream.publish(b.baseline([row(7), row(8)]))  # a new baseline rebuilds the table by itself
    manifest = await world.compact("rebuilt", base)
    assert manifest is not None
    assert sorted(r["id"] for r in await stored_rows(world.store, manifest)) == [7, 8]


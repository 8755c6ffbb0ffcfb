"""Query start-up from snapshots in memory: the newest usable snapshot plus the stream tail, and every fallback."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from laredo_kernel.changes import ColumnInfo, TableId
from laredo_core.config import load_settings
from laredo_core.snapshots.format import SnapshotManifest
from laredo_core.snapshots.memory_store import MemorySnapshotStore
from laredo_core.stream.feed import ChangeSink, FeedSubscription
from laredo_core.stream.memory_bounds import MemoryStreamBoundsReader
from laredo_query.adapters.memory import MemoryChangeFeed
from laredo_query.adapters.codec_stream_bounds import CodecStreamBounds
from laredo_query.application.startup_restore import RestoreSource, StartupRestore
from laredo_query.domain.snapshot_choice import StreamState, unusable_reason
from laredo_query.main import QueryApp, build
from laredo_testing.eventually import eventually
from services.query.tests.query_testkit import COLUMNS, TABLE, Batches, delete, insert, row, update
from services.query.tests.snapshot_testkit import SNAPSHOT_SERVICE, store_snapshot
from services.query.tests.unit.conftest import DEFINITIONS, World, build_world

MakeWorld = Callable[..., World]


def memory_bounds(feed: MemoryChangeFeed) -> CodecStreamBounds:
    return CodecStreamBounds(MemoryStreamBoundsReader(feed))


CONFIG = """
sources { pg { type = postgresql, connection = "host=unused" } }
tables = [ { source = pg, schema = public, table = items, targets = [ {
  type = indexed-memory, lookup_fields = [email], indexes = [ { name = by_status, fields = [status] } ]
  snapshot { store = local, restore_on_start = %s } } ] } ]
"""


class RecordingFeed(MemoryChangeFeed):
    """The memory feed, remembering every subscription it was asked to serve."""

    def __init__(self) -> None:
        super().__init__()
        self.subscriptions: list[FeedSubscription] = []

    async def run(self, subscriptions: Sequence[FeedSubscription], sink: ChangeSink) -> None:
        self.subscriptions += subscriptions
        await super().run(subscriptions, sink)


@dataclass
class History:
    """A stream with a reference table that reads it: snapshots are taken of the reference, as a writer would."""

    feed: RecordingFeed
    reference: World
    store: MemorySnapshotStore
    sequence: int = 0  # the stream sequence of the newest message
    applied_sequence: int = 0  # the stream sequence of the last message the reference applied
    clock: float = 1_700_000_000.0
    batches: Batches = field(default_factory=Batches)  # one builder: its positions keep increasing
    fmt: str = "jsonl"  # of the snapshots written

    def publish(self, *messages: bytes | list[bytes]) -> None:
        for message in messages:
            for data in message if isinstance(message, list) else [message]:
                self.sequence = self.feed.publish(TABLE, data)

    def on_batch(self, message: Any) -> None:
        self.reference.applier.on_batch(message)
        self.applied_sequence = message.stream_sequence

    def on_caught_up(self, table: TableId) -> None:
        self.reference.applier.on_caught_up(table)

    async def applied(self) -> None:
        await eventually(lambda: self.applied_sequence == self.sequence, what="the reference applied every message")

    async def snapshot(self, *, columns: Sequence[ColumnInfo] | None = None) -> SnapshotManifest:
        """A snapshot of the reference as it stands after every message published so far."""
        await self.applied()
        table = self.reference.table
        self.clock += 10
        return await store_snapshot(self.store, TABLE, columns or table.indexed.columns,
                                    [r.values for r in table.indexed.rows()], position=str(table.applied_position),
                                    stream_sequence=self.sequence, created_at=self.clock, fmt=self.fmt)

    def rows(self) -> dict[Any, dict[str, Any]]:
        return {r.values["id"]: r.values for r in self.reference.table.indexed.rows()}


@pytest.fixture
async def history() -> AsyncIterator[History]:
    feed = RecordingFeed()
    h = History(feed, build_world(), MemorySnapshotStore())
    task = asyncio.create_task(feed.run([FeedSubscription("pg", TABLE)], h))
    yield h
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@pytest.fixture
async def start_app(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    running: list[tuple[asyncio.Event, asyncio.Task[None]]] = []

    async def start(history: History, *, restore_on_start: bool = True, **overrides: Any) -> QueryApp:
        path = tmp_path / "laredo.conf"
        path.write_text(CONFIG % ("true" if restore_on_start else "false"))
        app = build(load_settings(path, env={}), feed=history.feed, snapshot_store=history.store,
                    grpc_host="127.0.0.1", grpc_port=0, health_host="127.0.0.1", health_port=0, **overrides)
        stop = asyncio.Event()
        task = asyncio.create_task(app.run(stop))
        running.append((stop, task))
        await eventually(lambda: app.started.is_set() or task.done(), what="the app to start")
        if task.done():
            task.result()
        return app

    yield start
    for stop, task in running:
        stop.set()
        await asyncio.wait_for(task, 10)


def mixed_history(history: History) -> None:
    history.publish(history.batches.baseline([row(i, qty=i) for i in range(1, 9)], chunk_rows=3))
    history.publish(history.batches.transaction(update(row(2, "paid", qty=20)), delete({"id": 3})))
    history.publish(history.batches.transaction(insert(row(40, "new", qty=4))))


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
async def test_a_started_service_loads_the_newest_snapshot_and_consumes_only_the_tail(
        history: History, start_app: Callable[..., Any], fmt: str) -> None:
    history.fmt = fmt
    mixed_history(history)
    older = await history.snapshot()
    history.publish(history.batches.transaction(update(row(1, "paid", qty=11))))
    newest = await history.snapshot()
    history.publish(history.batches.transaction(delete({"id": 4}), insert(row(50, "new", qty=5))),
                    history.batches.transaction(update(row(40, "shipped", qty=41))))
    await history.applied()
    assert newest.producer == SNAPSHOT_SERVICE and newest.journal_sequence == 0 and newest.format == fmt
    assert older.stream_sequence < newest.stream_sequence < history.sequence

    app = await start_app(history)
    table = app.service.tables[0]
    await eventually(lambda: table.ready, what="the restored table caught up")
    (subscription,) = [s for s in history.feed.subscriptions if s.start_after_sequence]
    assert subscription == FeedSubscription("pg", TABLE, newest.stream_sequence)
    assert app.sink is not None and app.sink.applied_sequence(TABLE) == history.sequence
    assert {r.values["id"]: r.values for r in table.indexed.rows()} == history.rows()
    assert [r.values["id"] for r in table.indexed.lookup("by_status", ["paid"])] == [1, 2]
    assert table.indexed.lookup("lookup", ["u50@example.com"])[0].values["qty"] == 5
    assert table.applied_position == history.reference.table.applied_position
    assert app.readiness()[0]


async def test_a_corrupted_newest_snapshot_is_skipped_for_an_older_one(
        history: History, caplog: pytest.LogCaptureFixture) -> None:
    mixed_history(history)
    older = await history.snapshot()
    history.publish(history.batches.transaction(update(row(1, "paid"))))
    newest = await history.snapshot()
    history.store._parts[(TABLE, newest.snapshot_id)]["rows-00001.jsonl"] += b'{"id":99}\n'  # noqa: SLF001
    world = build_world()
    with caplog.at_level(logging.WARNING):
        restored = await StartupRestore([RestoreSource(world.table, DEFINITIONS, history.store)],
                                        memory_bounds(history.feed)).restore()
    assert restored == {TABLE: older}
    assert f"snapshot {newest.snapshot_id} not used" in caplog.text and "does not match its manifest" in caplog.text
    assert len(world.table.indexed) == older.row_count and world.table.baseline_complete
    assert not world.table.ready, "loaded, but not caught up with the stream yet"
    world.feed = history.feed
    world.tasks.append(asyncio.create_task(history.feed.run(
        [FeedSubscription("pg", TABLE, older.stream_sequence)], world.applier)))
    try:
        await eventually(lambda: world.table.ready, what="ready once the tail after the older snapshot is applied")
        assert {r.values["id"]: r.values for r in world.table.indexed.rows()} == history.rows()
    finally:
        world.tasks[-1].cancel()
        await asyncio.gather(*world.tasks, return_exceptions=True)


@pytest.mark.parametrize("fault", ["gap", "columns", "recreated", "checksum", "missing part"])
async def test_an_unusable_snapshot_falls_back_to_the_whole_stream(
        history: History, caplog: pytest.LogCaptureFixture, fault: str) -> None:
    mixed_history(history)
    extra = (*COLUMNS, ColumnInfo("note", 25, "text"))
    manifest = await history.snapshot(columns=extra if fault == "columns" else None)
    if fault == "gap":
        history.publish(history.batches.transaction(insert(row(60))))
        history.feed.discard_through(manifest.stream_sequence + 1)
    elif fault == "recreated":
        await history.store.write_manifest(replace(manifest, stream_sequence=history.sequence + 5))
    elif fault == "checksum":
        await history.store.write_manifest(replace(manifest, checksum="sha256:00"))
    elif fault == "missing part":
        del history.store._parts[(TABLE, manifest.snapshot_id)]["rows-00002.jsonl"]  # noqa: SLF001
    world = build_world()
    with caplog.at_level(logging.WARNING):
        restored = await StartupRestore([RestoreSource(world.table, DEFINITIONS, history.store)],
                                        memory_bounds(history.feed)).restore()
    assert restored == {} and len(world.table.indexed) == 0 and world.table.applied_position is None
    expected = {"gap": "removed (stream limits), so its tail has a gap", "columns": "column 'note' is in the snapshot",
                "recreated": "the stream was created again", "checksum": "differs from the manifest's",
                "missing part": "not found"}[fault]
    assert expected in caplog.text and "reading the whole stream" in caplog.text


async def test_restore_on_start_false_reads_the_whole_stream(history: History, start_app: Callable[..., Any]) -> None:
    mixed_history(history)
    await history.snapshot()
    app = await start_app(history, restore_on_start=False)
    table = app.service.tables[0]
    await eventually(lambda: table.ready, what="the table read from the stream")
    assert all(s.start_after_sequence == 0 for s in history.feed.subscriptions)
    assert {r.values["id"]: r.values for r in table.indexed.rows()} == history.rows()


async def test_an_unreachable_stream_is_retried_then_the_snapshot_loads(history: History) -> None:
    mixed_history(history)
    manifest = await history.snapshot()
    reader = MemoryStreamBoundsReader(history.feed)
    reader.unreachable = 2
    world = build_world()
    restored = await StartupRestore([RestoreSource(world.table, DEFINITIONS, history.store)],
                                    CodecStreamBounds(reader), retry=(0.01, 0.01)).restore()
    assert restored == {TABLE: manifest} and reader.calls == 3


async def test_a_missing_stream_or_an_unavailable_store_means_the_whole_stream(history: History) -> None:
    mixed_history(history)
    await history.snapshot()
    reader = MemoryStreamBoundsReader(history.feed)
    bounds = CodecStreamBounds(reader)
    reader.missing = True
    world = build_world()
    assert await StartupRestore([RestoreSource(world.table, DEFINITIONS, history.store)], bounds).restore() == {}
    history.store.unavailable = True
    reader.missing = False
    assert await StartupRestore([RestoreSource(world.table, DEFINITIONS, history.store)], bounds).restore() == {}
    assert reader.calls == 1 and world.table.applied_position is None


async def test_rows_breaking_a_unique_index_are_left_out_and_counted(history: History) -> None:
    mixed_history(history)
    manifest = await history.snapshot()
    rows = [row(1, email="same@example.com"), row(2, email="same@example.com"), row(3)]
    duplicate = await store_snapshot(history.store, TABLE, COLUMNS, rows, position=manifest.source_position,
                                     stream_sequence=manifest.stream_sequence, created_at=history.clock + 100)
    world = build_world()
    restored = await StartupRestore([RestoreSource(world.table, DEFINITIONS, history.store)],
                                    memory_bounds(history.feed)).restore()
    assert restored == {TABLE: duplicate}
    assert len(world.table.indexed) == 2 and world.table.skipped_changes == 1


STATE = StreamState("s", first_sequence=3, last_sequence=20, table_last_sequence=18, columns=COLUMNS,
                    key_columns=("id",))
BASE = SnapshotManifest("id", TABLE, COLUMNS, ("id",), 0, "0/10:2", 10, 0, 0.0, (), "")


@pytest.mark.parametrize(("manifest", "state", "reason"), [
    (BASE, STATE, ""),
    (replace(BASE, stream_sequence=2), STATE, ""),  # the stream holds the very next message
    (replace(BASE, stream_sequence=1), STATE, "tail has a gap"),
    (replace(BASE, stream_sequence=21), STATE, "created again"),
    (replace(BASE, stream_sequence=20), replace(STATE, first_sequence=21), ""),  # nothing after it, nothing lost
    (replace(BASE, table=TableId("public", "other")), STATE, "names table public.other"),
    (replace(BASE, source_position="nonsense"), STATE, "is not a position"),
    (replace(BASE, key_columns=("email",)), STATE, "the key is (email)"),
    (BASE, replace(STATE, columns=()), "cannot be checked"),
])
def test_unusable_reason(manifest: SnapshotManifest, state: StreamState, reason: str) -> None:
    found = unusable_reason(manifest, TABLE, state)
    assert (reason in found and found) if reason else found == ""

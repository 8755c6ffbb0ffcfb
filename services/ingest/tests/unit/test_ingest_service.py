"""The ingest use case against in-memory adapters: baseline, streaming, confirmation, restarts."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator

import pytest

from laredo_kernel.changes import BatchKind, ColumnInfo, TableId
from laredo_kernel.errors import LaredoError
from laredo_kernel.position import BASELINE_ORDINAL_BASE
from laredo_kernel.tuples import decode_tuple_exact

from laredo_ingest.adapters.memory import (
    InMemoryChangePublisher,
    InMemoryStateStore,
    MemoryReplicationStream,
    MemorySource,
    MemorySourceDatabase,
    RecordingObserver,
    WalBuilder,
)
from laredo_ingest.application.ingest_service import IngestService
from laredo_ingest.application.options import IngestOptions
from laredo_ingest.application.status import IngestPhase, IngestStatus
from laredo_ingest.domain.errors import PublishFailed, WalLevelNotLogical
from laredo_ingest.domain.schema import ReplicaIdentity, TableSchema
from laredo_ingest.domain.start_plan import SlotMode
from laredo_ingest.ports import IngestPorts
from laredo_testing.eventually import eventually

USERS = TableSchema(TableId("public", "users"), 16385,
                    (ColumnInfo("id", 23, "int4", -1, True, True, 1), ColumnInfo("name", 25, "text")),
                    ReplicaIdentity.DEFAULT)
OPTIONS = IngestOptions(
    source_id="main", tables=(USERS.table,), slot_mode=SlotMode.STATEFUL, slot_name="laredo_main",
    publication_name="laredo_main_pub", publication_create=True, always_baseline=False, baseline_chunk_rows=2,
    status_interval=0.2, subject_prefix="laredo", max_batch_changes=100, max_batch_bytes=1 << 20,
    reconnect_initial=0.01, reconnect_max=0.05, stop_timeout=1.0, baseline_ack_timeout=2.0)


@dataclasses.dataclass
class World:
    source: MemorySource
    publisher: InMemoryChangePublisher
    state: InMemoryStateStore
    observer: RecordingObserver

    def service(self, options: IngestOptions = OPTIONS) -> IngestService:
        ports = IngestPorts(lambda: MemorySourceDatabase(self.source), lambda: MemoryReplicationStream(self.source),
                            self.publisher, self.state, self.observer)
        return IngestService(options, ports, IngestStatus())

    def batches(self, kind: BatchKind | None = None) -> list:
        return [m.batch for m in self.publisher.stored if kind is None or m.batch.kind is kind]


@pytest.fixture
def world() -> World:
    source = MemorySource()
    source.add_table(USERS, [[b"1", b"ann"], [b"2", b"bob"], [b"3", None]])
    return World(source, InMemoryChangePublisher(), InMemoryStateStore(), RecordingObserver())


@pytest.fixture
async def running(world: World) -> AsyncIterator[tuple[IngestService, asyncio.Event, asyncio.Task]]:
    service, stop = world.service(), asyncio.Event()
    task = asyncio.create_task(service.run(stop))
    yield service, stop, task
    stop.set()
    await asyncio.wait_for(task, 5)


def ins(i: int, name: str) -> bytes:
    return WalBuilder.insert(USERS.relation_id, [str(i).encode(), name.encode()])


async def test_baseline_then_stream_then_confirm_only_what_was_acknowledged(world: World, running) -> None:
    service, stop, task = running
    await eventually(lambda: service.status.phase is IngestPhase.STREAMING, what="streaming")
    rows = world.batches(BatchKind.BASELINE_ROWS)
    assert [len(b.changes) for b in rows] == [2, 1]
    assert [c.ordinal - BASELINE_ORDINAL_BASE for b in rows for c in b.changes] == [0, 1, 2]
    [end] = world.batches(BatchKind.BASELINE_END)
    assert end.baseline_row_count == 3 and end.last_chunk
    assert world.state.states["main"].baseline_complete
    assert world.source.publications["laredo_main_pub"].tables == {USERS.table}
    assert [s.name for s in world.observer.spans] == ["ingest.baseline"]

    world.publisher.hold_acks = True
    end_lsn = world.source.commit([WalBuilder.relation(USERS), ins(4, "dan")])
    await eventually(lambda: len(world.batches(BatchKind.TRANSACTION)) == 1, what="transaction published")
    await asyncio.sleep(0.3)  # more than status_interval: an update goes out, still without the unacked end
    assert all(flush < end_lsn for _, flush, _ in world.source.status_updates)
    world.publisher.release_acks()
    await eventually(lambda: world.source.slots["laredo_main"].confirmed_flush_lsn == end_lsn,
                     what="slot confirmed at the transaction end")
    assert service.status.confirmed_lsn == end_lsn
    tx = world.batches(BatchKind.TRANSACTION)[0]
    assert world.publisher.stored[-1].headers["traceparent"].startswith("00-")
    assert tx.end_lsn == end_lsn and tx.last_chunk


async def test_a_failed_publish_restarts_from_the_slot_without_losing_the_transaction(world: World, running) -> None:
    service, stop, task = running
    await eventually(lambda: service.status.phase is IngestPhase.STREAMING, what="streaming")
    world.publisher.fail_next = 1
    end_lsn = world.source.commit([WalBuilder.relation(USERS), ins(4, "dan")])
    await eventually(lambda: service.status.restarts >= 1, what="a restart after the failed publish")
    await eventually(lambda: world.source.slots["laredo_main"].confirmed_flush_lsn == end_lsn,
                     what="the transaction published after the restart")
    assert len(world.batches(BatchKind.TRANSACTION)) == 1
    assert len(world.batches(BatchKind.BASELINE_END)) == 1  # resumed, no second baseline


async def test_a_broken_connection_resumes_and_duplicates_are_dropped(world: World, running) -> None:
    service, stop, task = running
    await eventually(lambda: service.status.phase is IngestPhase.STREAMING, what="streaming")
    world.publisher.hold_acks = True
    first = world.source.commit([WalBuilder.relation(USERS), ins(4, "dan")])
    await eventually(lambda: len(world.batches(BatchKind.TRANSACTION)) == 1, what="published, unacked")
    world.source.break_streams()
    await eventually(lambda: service.status.restarts == 1, what="restart")
    world.publisher.hold_acks = False
    world.publisher.release_acks()
    second = world.source.commit([WalBuilder.relation(USERS), ins(5, "eve")])
    await eventually(lambda: world.source.slots["laredo_main"].confirmed_flush_lsn == second, what="both confirmed")
    assert first < second
    assert len(world.batches(BatchKind.TRANSACTION)) == 2 and world.publisher.duplicates == 1


async def test_idle_keepalives_confirm_only_between_transactions_and_after_acks(world: World, running) -> None:
    service, stop, task = running
    await eventually(lambda: service.status.phase is IngestPhase.STREAMING, what="streaming")
    world.source.commit([WalBuilder.relation(TableSchema(TableId("public", "other"), 99, (), ReplicaIdentity.FULL))])
    world.source.send_keepalive(reply_requested=True)
    await eventually(lambda: world.source.status_updates and world.source.status_updates[-1][1] == world.source.wal.lsn,
                     what="the keepalive position confirmed")


async def test_a_keepalive_inside_a_transaction_confirms_nothing_beyond_acknowledged_ends(world: World,
                                                                                          running) -> None:
    service, stop, task = running
    await eventually(lambda: service.status.ready, what="ready")
    world.publisher.hold_acks = True
    frames, end_lsn = world.source.wal.transaction([WalBuilder.relation(USERS), ins(4, "dan")])
    far_ahead = end_lsn + 0x10000
    frames.insert(2, WalBuilder.keepalive(far_ahead, reply_requested=True))  # mid-transaction
    world.source.feed.append((end_lsn, frames))
    world.source.send_keepalive(reply_requested=True)  # idle, but the transaction is not acknowledged yet
    world.source._wake()
    await eventually(lambda: len(world.source.status_updates) >= 2, what="replies to both keepalives")
    before_ack = service.status.confirmed_lsn
    assert all(flush < end_lsn for _, flush, _ in world.source.status_updates)
    world.publisher.release_acks()
    await eventually(lambda: world.source.slots["laredo_main"].confirmed_flush_lsn >= end_lsn, what="confirmed")
    assert before_ack < end_lsn
    assert max(flush for _, flush, _ in world.source.status_updates) < far_ahead


async def test_a_crash_during_the_baseline_means_a_new_baseline_next_time(world: World) -> None:
    world.publisher.hold_acks = True
    service, stop = world.service(), asyncio.Event()
    task = asyncio.create_task(service.run(stop))
    await eventually(lambda: world.batches(BatchKind.BASELINE_END), what="baseline published, unacked")
    stop.set()
    await asyncio.wait_for(task, 5)
    assert not world.state.states["main"].baseline_complete
    assert "laredo_main" in world.source.slots

    world.publisher.hold_acks = False
    world.publisher.release_acks()
    service, stop = world.service(), asyncio.Event()
    task = asyncio.create_task(service.run(stop))
    await eventually(lambda: service.status.ready, what="second run streaming")
    assert len({b.baseline_id for b in world.batches(BatchKind.BASELINE_END)}) == 2
    stop.set()
    await asyncio.wait_for(task, 5)
    assert service.status.phase is IngestPhase.STOPPED


async def test_a_clean_restart_resumes_without_a_new_baseline(world: World, running) -> None:
    service, stop, task = running
    await eventually(lambda: service.status.ready, what="ready")
    end_lsn = world.source.commit([WalBuilder.relation(USERS), ins(4, "dan")])
    await eventually(lambda: service.status.confirmed_lsn == end_lsn, what="confirmed")
    stop.set()
    await asyncio.wait_for(task, 5)
    again, stop2 = world.service(), asyncio.Event()
    task2 = asyncio.create_task(again.run(stop2))
    await eventually(lambda: again.status.ready, what="ready again")
    second = world.source.commit([WalBuilder.relation(USERS), ins(5, "eve")])
    await eventually(lambda: again.status.confirmed_lsn == second, what="second confirmed")
    stop2.set()
    await asyncio.wait_for(task2, 5)
    assert len(world.batches(BatchKind.BASELINE_END)) == 1
    assert len(world.batches(BatchKind.TRANSACTION)) == 2


async def test_ephemeral_mode_baselines_every_start_and_drops_its_slot(world: World) -> None:
    options = dataclasses.replace(OPTIONS, slot_mode=SlotMode.EPHEMERAL)
    for _ in range(2):
        service, stop = world.service(options), asyncio.Event()
        task = asyncio.create_task(service.run(stop))
        await eventually(lambda: service.status.ready, what="ready")
        stop.set()
        await asyncio.wait_for(task, 5)
        assert "laredo_main" not in world.source.slots
    assert len(world.batches(BatchKind.BASELINE_END)) == 2


async def test_non_retryable_problems_stop_the_service_with_the_error(world: World) -> None:
    world.source.facts = dataclasses.replace(world.source.facts, wal_level="replica")
    service = world.service()
    with pytest.raises(WalLevelNotLogical):
        await service.run(asyncio.Event())
    assert service.status.phase is IngestPhase.FAILED


async def test_retryable_problems_give_up_after_max_attempts(world: World) -> None:
    world.source.unreachable = True
    service = world.service(dataclasses.replace(OPTIONS, reconnect_max_attempts=3))
    with pytest.raises(LaredoError, match="unreachable"):
        await service.run(asyncio.Event())
    assert service.status.restarts == 2


def test_publish_failed_is_retryable() -> None:
    assert PublishFailed("x").retryable


async def test_a_reload_publishes_a_new_baseline_at_the_helper_slot_and_skips_older_changes(world: World,
                                                                                             running) -> None:
    service, stop, task = running
    await eventually(lambda: service.status.ready, what="ready")
    world.source.rows[USERS.table] = [[b"1", b"ann"], [b"9", b"zed"]]  # what the helper snapshot sees
    outcome = await asyncio.wait_for(service.control.reload([USERS.table]), 5)
    assert outcome == "re-baselined public.users"
    ends = world.batches(BatchKind.BASELINE_END)
    assert len(ends) == 2 and ends[-1].baseline_row_count == 2
    reload_lsn = ends[-1].commit_lsn
    assert "laredo_main_rb" not in world.source.slots  # the temporary helper slot is gone
    assert world.state.states["main"].reload_tables == ()
    later = world.source.commit([WalBuilder.relation(USERS), ins(10, "after")])
    await eventually(lambda: service.status.confirmed_lsn == later, what="later change confirmed")
    [tx] = world.batches(BatchKind.TRANSACTION)
    assert tx.commit_lsn >= reload_lsn
    with pytest.raises(LaredoError, match="not a configured table"):
        await service.control.reload([TableId("public", "nope")])
    assert service.status.phase is IngestPhase.STREAMING  # a refused request does not end streaming


async def test_pause_stops_reading_and_resume_catches_up(world: World, running) -> None:
    service, stop, task = running
    await eventually(lambda: service.status.ready, what="ready")
    assert await service.control.pause() == "paused"
    assert service.status.phase is IngestPhase.PAUSED and world.state.states["main"].paused
    end_lsn = world.source.commit([WalBuilder.relation(USERS), ins(4, "dan")])
    await asyncio.sleep(0.3)  # absence over time: more than a status interval
    assert not world.batches(BatchKind.TRANSACTION)
    assert await service.control.resume() == "resumed"
    await eventually(lambda: service.status.confirmed_lsn == end_lsn, what="caught up after resume")
    assert not world.state.states["main"].paused


async def test_reset_drops_the_slot_and_rebaselines_with_a_resync(world: World, running) -> None:
    service, stop, task = running
    await eventually(lambda: service.status.ready, what="ready")
    outcome = await asyncio.wait_for(service.control.reset(), 5)
    assert outcome.startswith("slot reset; new baseline")
    [resync] = world.batches(BatchKind.RESYNC_REQUIRED)
    assert "reset by an operator" in resync.reason
    assert len(world.batches(BatchKind.BASELINE_END)) == 2
    await eventually(lambda: service.status.ready, what="streaming again")


async def test_gauges_report_lag_progress_and_state(world: World, running) -> None:
    service, stop, task = running
    await eventually(lambda: service.status.ready, what="ready")
    world.source.commit([WalBuilder.relation(USERS), ins(4, "dan")])
    await eventually(lambda: service.status.changes == 1, what="one change")
    gauges = service.status.gauges()
    assert gauges["changes_total"] == 1 and gauges["streaming"] == 1 and gauges["baseline_running"] == 0
    assert service.status.report()["baseline"]["rows"] == 3


async def test_a_source_whose_wal_started_again_lower_is_baselined_in_a_new_epoch(world: World) -> None:
    """The same stream and state, then a source whose WAL is behind the stream (restored from an earlier
    backup, say): the slot is gone, the new baseline's positions are lower than those the stream holds, so it
    is published in epoch 1 after a RESYNC_REQUIRED naming why; later transactions stay in epoch 1."""
    service, stop = world.service(), asyncio.Event()
    task = asyncio.create_task(service.run(stop))
    await eventually(lambda: service.status.phase is IngestPhase.STREAMING, what="streaming")
    for i in range(4, 40):
        world.source.commit([WalBuilder.relation(USERS), ins(i, "x" * 200)])
    last = world.source.commit([WalBuilder.relation(USERS), ins(99, "last")])
    await eventually(lambda: world.source.slots["laredo_main"].confirmed_flush_lsn == last, what="all confirmed")
    stop.set()
    await asyncio.wait_for(task, 5)
    assert {m.epoch for m in world.publisher.stored} == {0}

    restored = MemorySource()  # its WAL starts again where the first one's did
    restored.add_table(USERS, [[b"1", b"ann"], [b"7", b"restored"]])
    world.source = restored
    before = len(world.publisher.stored)
    service, stop = world.service(), asyncio.Event()
    task = asyncio.create_task(service.run(stop))
    await eventually(lambda: service.status.phase is IngestPhase.STREAMING, what="streaming again")
    world.source.commit([WalBuilder.relation(USERS), ins(8, "after")])
    await eventually(lambda: world.publisher.stored[-1].batch.kind is BatchKind.TRANSACTION,
                     what="the new transaction")
    stop.set()
    await asyncio.wait_for(task, 5)
    new = world.publisher.stored[before:]
    assert {m.epoch for m in new} == {1} and world.state.states["main"].epoch == 1
    assert new[0].batch.kind is BatchKind.RESYNC_REQUIRED and "started again lower" in new[0].batch.reason
    assert new[1].batch.commit_lsn < world.publisher.stored[before - 1].batch.commit_lsn  # lower, yet later


async def test_a_change_stored_ahead_of_a_lost_one_is_replaced_by_a_new_baseline(world: World, running) -> None:
    """Another client's message took the place of a change whose successor, already sent, was stored ahead of
    it: ingest does not re-send the lost change behind its successor (consumers would skip it as a replay) but
    takes a new baseline after a RESYNC_REQUIRED that says why."""
    service, stop, task = running
    await eventually(lambda: service.status.phase is IngestPhase.STREAMING, what="streaming")
    world.publisher.hold_acks = True
    world.publisher.foreign_next = True
    for i, name in ((4, "lost"), (5, "ahead")):
        world.source.rows[USERS.table].append([str(i).encode(), name.encode()])  # what a snapshot reads
        world.source.commit([WalBuilder.relation(USERS), ins(i, name)])
    await eventually(lambda: len(world.batches(BatchKind.TRANSACTION)) == 1, what="the later change stored")
    world.publisher.hold_acks = False
    world.publisher.release_acks()
    await eventually(lambda: len(world.batches(BatchKind.BASELINE_END)) == 2, what="a new baseline")
    [resync] = world.batches(BatchKind.RESYNC_REQUIRED)
    assert "ingest did not publish" in resync.reason and "new baseline" in resync.reason
    [ahead] = world.batches(BatchKind.TRANSACTION)  # the lost change was not re-sent behind it
    after = world.batches()[world.batches().index(resync):]
    rows = {decode_tuple_exact(c.new_tuple)[0] for b in after if b.kind is BatchKind.BASELINE_ROWS for c in b.changes}
    assert rows == {b"1", b"2", b"3", b"4", b"5"}
    await eventually(lambda: service.status.ready, what="streaming again")

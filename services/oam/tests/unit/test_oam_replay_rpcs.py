"""RestoreSnapshot, StartReplay, GetReplayStatus and StopReplay over a real grpc.aio server, with in-memory
stores and fake fan-out and query instances that answer the rebuild commands and heartbeat their progress."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from laredo.v1 import oam_pb2, oam_pb2_grpc
from laredo_core.config import load_settings
from laredo_core.coordination.ports import Command, CommandKind, CommandResult, CommandStatus, InstanceStatus
from laredo_core.rebuild.records import outcome_id
from laredo_core.snapshots.memory_store import MemorySnapshotStore
from laredo_testing.eventually import eventually

from laredo_oam.adapters.memory import InMemoryCoordinationStore
from laredo_oam.main import build
from services.oam.tests.snapshot_testkit import write_snapshot

CONFIG = """
sources { pg { type = postgresql, connection = "host=127.0.0.1 dbname=app" } }
tables = [
  { source = pg, table = users, targets = [
      { type = replication-fanout, snapshot { interval = 0s, store = local, store_config { path = /data/snaps } } },
      { type = indexed-memory, lookup_fields = [name] } ] }
  { source = pg, table = orders, targets = [ { type = replication-fanout } ] }
]
"""
Answer = Callable[[Command], tuple[CommandStatus, str, dict[str, Any]]]


def started(command: Command) -> tuple[CommandStatus, str, dict[str, Any]]:
    return CommandStatus.SUCCEEDED, "started", {"rebuild_id": command.args["rebuild_id"], "state": "running",
                                                "warnings": []}


@dataclass
class FakeInstance:
    """Answers RESTORE/REPLAY/STOP_REPLAY for `<service>:<id>` and heartbeats `replays` like a real instance."""

    store: InMemoryCoordinationStore
    service: str
    instance_id: str
    answer: Answer = started
    tables: tuple[str, ...] = ("public.users",)
    replays: dict[str, dict[str, Any]] = field(default_factory=dict)
    received: list[Command] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.service}:{self.instance_id}"

    async def beat(self) -> None:
        await self.store.heartbeat(InstanceStatus(self.service, self.instance_id, {
            "ready": True, "tables": {t: {"ready": True} for t in self.tables}, "replays": self.replays}), ttl=30)

    def progress(self, rebuild_id: str, state: str, rows: int) -> dict[str, Any]:
        self.replays[rebuild_id] = {"kind": "replay", "table": "public.users", "snapshot_id": "s", "state": state,
                                    "phase": "tail" if state == "running" else "done", "rows_replayed": rows,
                                    "changes": 0, "started_unix_ms": 1_000, "finished_unix_ms":
                                    0 if state == "running" else 3_500, "speed": "full", "message": "",
                                    "warnings": []}
        return self.replays[rebuild_id]

    async def serve(self) -> None:
        async for command in self.store.commands(self.name, self.instance_id):
            self.received.append(command)
            status, message, details = self.answer(command)
            rebuild_id = command.args["rebuild_id"]
            if command.kind is CommandKind.STOP_REPLAY:
                details = {"state": "stopped"}
                self.progress(rebuild_id, "stopped", 3)
            elif status is CommandStatus.SUCCEEDED:
                self.progress(rebuild_id, "running", 0)
            await self.beat()
            await self.store.complete_command(command, CommandResult(command.command_id, status, message, details,
                                                                     executed_by=self.instance_id))


@pytest.fixture
def store() -> InMemoryCoordinationStore:
    return InMemoryCoordinationStore(block=0.05)


@pytest.fixture
def snapshots() -> MemorySnapshotStore:
    return MemorySnapshotStore()


@pytest.fixture
async def stub(tmp_path: Path, store: InMemoryCoordinationStore,
               snapshots: MemorySnapshotStore) -> AsyncIterator[oam_pb2_grpc.TableSyncOAMStub]:
    (tmp_path / "laredo.conf").write_text(CONFIG)
    app = build(load_settings(tmp_path / "laredo.conf", env={}), store=store, snapshot_store=snapshots,
                command_timeout=2.0, grpc_host="127.0.0.1", grpc_port=0, health_host="127.0.0.1", health_port=0)
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    await asyncio.wait_for(app.started.wait(), 10)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.grpc_port}")
    try:
        yield oam_pb2_grpc.TableSyncOAMStub(channel)
    finally:
        await channel.close()
        stop.set()
        await asyncio.wait_for(task, 10)


@contextlib.asynccontextmanager
async def running(*instances: FakeInstance) -> AsyncIterator[None]:
    for instance in instances:
        await instance.beat()
    tasks = [asyncio.create_task(i.serve()) for i in instances]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def code_of(call: Any) -> grpc.StatusCode:
    with pytest.raises(grpc.aio.AioRpcError) as error:
        await call
    return error.value.code()


async def test_restore_needs_an_id_confirm_and_a_known_snapshot(stub: oam_pb2_grpc.TableSyncOAMStub,
                                                                snapshots: MemorySnapshotStore,
                                                                store: InMemoryCoordinationStore) -> None:
    await write_snapshot(snapshots, "public.users", 1_700_000_000.0, snapshot_id="snap-a")
    restore = stub.RestoreSnapshot
    assert await code_of(restore(oam_pb2.RestoreSnapshotRequest())) is grpc.StatusCode.INVALID_ARGUMENT
    assert await code_of(restore(oam_pb2.RestoreSnapshotRequest(snapshot_id="a/b", confirm=True))) is \
        grpc.StatusCode.INVALID_ARGUMENT
    assert await code_of(restore(oam_pb2.RestoreSnapshotRequest(snapshot_id="snap-a"))) is \
        grpc.StatusCode.FAILED_PRECONDITION
    assert await code_of(restore(oam_pb2.RestoreSnapshotRequest(snapshot_id="snap-zz", confirm=True))) is \
        grpc.StatusCode.NOT_FOUND
    store.unavailable = True
    assert await code_of(restore(oam_pb2.RestoreSnapshotRequest(snapshot_id="snap-a", confirm=True))) is \
        grpc.StatusCode.UNAVAILABLE


async def test_restore_starts_on_every_instance_serving_the_table(stub: oam_pb2_grpc.TableSyncOAMStub,
                                                                  snapshots: MemorySnapshotStore,
                                                                  store: InMemoryCoordinationStore) -> None:
    await write_snapshot(snapshots, "public.users", 1_700_000_000.0, snapshot_id="snap-a", user_meta={"why": "test"})
    fanout = FakeInstance(store, "fanout", "f1", lambda c: (CommandStatus.SUCCEEDED, "started", {
        "rebuild_id": c.args["rebuild_id"], "state": "running", "warnings": ["column 'x' differs"]}))
    query = FakeInstance(store, "query", "q1")
    other = FakeInstance(store, "fanout", "f2", tables=("public.orders",))
    async with running(fanout, query, other):
        reply = await stub.RestoreSnapshot(oam_pb2.RestoreSnapshotRequest(snapshot_id="snap-a", confirm=True,
                                                                          skip_meta_check=True))
        assert reply.accepted, reply.message
        assert dict(reply.user_meta) == {"why": "test"} and list(reply.warnings) == ["column 'x' differs"]
        assert "fanout:f1" in reply.message and "query:q1" in reply.message and not other.received
        command = fanout.received[0]
        assert command.kind is CommandKind.RESTORE and query.received[0].kind is CommandKind.RESTORE
        assert {k: command.args[k] for k in ("snapshot_id", "schema", "table", "skip_meta_check")} == {
            "snapshot_id": "snap-a", "schema": "public", "table": "users", "skip_meta_check": True}
        rebuild_id = command.args["rebuild_id"]
        assert rebuild_id.startswith("restore-") and rebuild_id in reply.message

        status = await stub.GetReplayStatus(oam_pb2.GetReplayStatusRequest(replay_id=rebuild_id))
        assert (status.replay_id, status.state) == (rebuild_id, "running")
        fanout.progress(rebuild_id, "completed", 5)
        query.progress(rebuild_id, "completed", 5)
        for instance in (fanout, query):
            await instance.beat()
        status = await stub.GetReplayStatus(oam_pb2.GetReplayStatusRequest(replay_id=rebuild_id))
        assert (status.state, status.rows_replayed, status.elapsed.seconds) == ("completed", 5, 2)


async def test_a_refusal_or_no_instance_means_not_accepted(stub: oam_pb2_grpc.TableSyncOAMStub,
                                                           snapshots: MemorySnapshotStore,
                                                           store: InMemoryCoordinationStore) -> None:
    await write_snapshot(snapshots, "public.users", 1_700_000_000.0, snapshot_id="snap-a")
    request = oam_pb2.RestoreSnapshotRequest(snapshot_id="snap-a", confirm=True)
    reply = await stub.RestoreSnapshot(request)
    assert not reply.accepted and "no fanout or query instance serves public.users" in reply.message
    refusing = FakeInstance(store, "fanout", "f1", lambda c: (CommandStatus.FAILED, "the key differs", {}))
    async with running(refusing):
        reply = await stub.RestoreSnapshot(request)
    assert not reply.accepted and "fanout:f1: failed (the key differs)" in reply.message


async def test_start_replay_checks_its_request(stub: oam_pb2_grpc.TableSyncOAMStub, snapshots: MemorySnapshotStore,
                                               store: InMemoryCoordinationStore) -> None:
    await write_snapshot(snapshots, "public.users", 1_700_000_000.0, snapshot_id="snap-a")
    start = stub.StartReplay
    invalid = [oam_pb2.StartReplayRequest(),
               oam_pb2.StartReplayRequest(snapshot_id="snap-a", speed="fast"),
               oam_pb2.StartReplayRequest(snapshot_id="snap-a", speed="-2x"),
               oam_pb2.StartReplayRequest(snapshot_id="snap-a", target_pipeline_id="nonsense"),
               oam_pb2.StartReplayRequest(snapshot_id="snap-a", target_pipeline_id="pg:public.orders:replication-fanout"),
               oam_pb2.StartReplayRequest(snapshot_id="snap-a", tables=["public.orders"]),
               oam_pb2.StartReplayRequest(snapshot_id="snap-a", tables=["orders"])]
    for request in invalid:
        assert await code_of(start(request)) is grpc.StatusCode.INVALID_ARGUMENT, request
    for request in (oam_pb2.StartReplayRequest(snapshot_id="snap-zz"),
                    oam_pb2.StartReplayRequest(snapshot_id="snap-a", target_pipeline_id="pg:public.users:elsewhere")):
        assert await code_of(start(request)) is grpc.StatusCode.NOT_FOUND, request
    for replay_id, code in (("", grpc.StatusCode.INVALID_ARGUMENT), ("replay-nope", grpc.StatusCode.NOT_FOUND)):
        assert await code_of(stub.GetReplayStatus(oam_pb2.GetReplayStatusRequest(replay_id=replay_id))) is code
        assert await code_of(stub.StopReplay(oam_pb2.StopReplayRequest(replay_id=replay_id))) is code


async def test_replay_of_one_pipeline_reports_progress_and_stops(stub: oam_pb2_grpc.TableSyncOAMStub,
                                                                 snapshots: MemorySnapshotStore,
                                                                 store: InMemoryCoordinationStore) -> None:
    await write_snapshot(snapshots, "public.users", 1_700_000_000.0, snapshot_id="snap-a")
    fanout, query = FakeInstance(store, "fanout", "f1"), FakeInstance(store, "query", "q1")
    async with running(fanout, query):
        reply = await stub.StartReplay(oam_pb2.StartReplayRequest(
            snapshot_id="snap-a", target_pipeline_id="pg:public.users:indexed-memory", speed="0.5x",
            tables=["public.users"]))
        assert reply.accepted and reply.replay_id.startswith("replay-"), reply.message
        assert not fanout.received and query.received[0].args["speed"] == "0.5x"
        status = await stub.GetReplayStatus(oam_pb2.GetReplayStatusRequest(replay_id=reply.replay_id))
        assert status.state == "running"

        stopped = await stub.StopReplay(oam_pb2.StopReplayRequest(replay_id=reply.replay_id))
        assert stopped.stopped
        assert query.received[-1].kind is CommandKind.STOP_REPLAY
        status = await stub.GetReplayStatus(oam_pb2.GetReplayStatusRequest(replay_id=reply.replay_id))
        assert (status.state, status.rows_replayed) == ("stopped", 3)
        assert (await stub.StopReplay(oam_pb2.StopReplayRequest(replay_id=reply.replay_id))).stopped


async def test_the_outcome_of_an_instance_that_left_comes_from_its_record(stub: oam_pb2_grpc.TableSyncOAMStub,
                                                                          snapshots: MemorySnapshotStore,
                                                                          store: InMemoryCoordinationStore) -> None:
    await write_snapshot(snapshots, "public.users", 1_700_000_000.0, snapshot_id="snap-a")
    fanout, query = FakeInstance(store, "fanout", "f1"), FakeInstance(store, "query", "q1")
    async with running(fanout, query):
        reply = await stub.StartReplay(oam_pb2.StartReplayRequest(snapshot_id="snap-a"))
    assert reply.accepted, reply.message
    report = fanout.progress(reply.replay_id, "completed", 7)
    record = outcome_id(reply.replay_id, "fanout", "f1")
    await store.complete_command(Command(record, "fanout:f1", CommandKind.REPLAY),
                                 CommandResult(record, CommandStatus.SUCCEEDED, "done", report))
    await store.deregister("fanout", "f1")
    query.progress(reply.replay_id, "completed", 7)
    await query.beat()
    status = await stub.GetReplayStatus(oam_pb2.GetReplayStatusRequest(replay_id=reply.replay_id))
    assert (status.state, status.rows_replayed) == ("completed", 7)
    await store.deregister("query", "q1")
    status = await eventually(lambda: stub.GetReplayStatus(oam_pb2.GetReplayStatusRequest(replay_id=reply.replay_id)),
                              what="the status")
    assert status.state == "error"  # the query instance left without an outcome

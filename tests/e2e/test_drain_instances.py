"""Draining one fan-out instance by id through OAM and the `laredo drain --instance` CLI, on real processes.

ingest, two fan-out instances (the system's own and `fanout-b`), query and OAM run on a throwaway PostgreSQL,
NATS and Redis. A client (the library users run) on each instance records the GoAways it is sent. Draining
`fanout-b` moves only its client; the other instance's client keeps streaming changes. Draining the last ready
instance is refused unless forced.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import pytest

from laredo.replication.v1 import replication_pb2 as pb
from laredo.v1 import oam_pb2
from laredo_client import LaredoClient
from laredo_kernel.changes import TableId
from laredo_core.coordination.redis_store import RedisCoordinationStore
from laredo_testing.eventually import eventually
from libs.cli.tests.cli_runner import run_subprocess

from tests.e2e.harness import ServiceProcess, create_table, free_port
from tests.e2e.system import LibraryReplica, System, running_system, table_rows

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SECOND = "fanout-b"


class GoAways:
    """A client's StreamObserver keeping the GoAways it is sent."""

    def __init__(self) -> None:
        self.go_aways: list[pb.GoAway] = []

    def opened(self, stream: str, request: pb.SyncRequest) -> None:
        return None

    def received(self, stream: str, message: bytes) -> None:
        response = pb.SyncResponse.FromString(message)
        if response.WhichOneof("message") == "go_away":
            self.go_aways.append(response.go_away)

    def closed(self, stream: str) -> None:
        return None


class WatchedReplica(LibraryReplica):
    """The client's rows (checked like every end-to-end replica) and its GoAways."""

    def __init__(self, client: LaredoClient, watched: GoAways) -> None:
        super().__init__(client, reconnects=True)  # a GoAway sends it elsewhere
        self.go_aways = watched.go_aways


@pytest.fixture
def system(pg_dsn: str, nats_url: str, unique_name: str, tmp_path: Path) -> Iterator[System]:
    table = TableId("public", unique_name)
    create_table(pg_dsn, str(table), 200)
    with running_system(pg_dsn, nats_url, unique_name, table, tmp_path) as running:  # own Redis
        yield running


@pytest.fixture
def second_port(system: System, tmp_path: Path) -> Iterator[int]:
    """A second fan-out instance (`fanout-b`) of the same configuration; its gRPC port."""
    port, health = free_port(), free_port()
    process = ServiceProcess("fanout", tmp_path / "laredo.conf", health, tmp_path / "fanout-b.log", extra_args=[
        "--set", f"fanout.grpc.port={port}", "--set", f"fanout.health_port={health}",
        "--set", f"fanout.instance_id={SECOND}"])
    process.start()
    try:
        process.wait_ready(90)
        yield port
    finally:
        process.stop()


@asynccontextmanager
async def client(port: int, table: TableId, client_id: str) -> AsyncIterator[WatchedReplica]:
    watched = GoAways()
    async with LaredoClient(f"127.0.0.1:{port}", table.schema, table.name, client_id=client_id,
                            stream_observer=watched) as library:
        await library.await_ready(60)
        yield WatchedReplica(library, watched)


async def ready_instances(system: System) -> dict[str, bool]:
    """Fan-out instance id -> whether it reports the table ready and not draining."""
    assert system.redis is not None
    store = RedisCoordinationStore(system.redis.url, key_prefix=system.prefix)
    try:
        instances = await store.instances("fanout")
    finally:
        await store.aclose()
    entries = {i.instance_id: i.status.get("tables", {}).get(str(system.table), {}) for i in instances}
    return {i: bool(e.get("ready")) and not e.get("draining") for i, e in entries.items()}


async def test_drain_one_instance_by_id_and_refuse_the_last_ready_one(system: System, second_port: int) -> None:
    table, oam = system.table, f"127.0.0.1:{system.ports['oam']}"
    await eventually(lambda: _two_ready(system), timeout=30, interval=0.2,
                     what="both fan-out instances to report the table ready")
    first = next(i for i in await ready_instances(system) if i != SECOND)
    async with client(system.ports["fanout"], table, "on-first") as on_first, \
            client(second_port, table, "on-second") as on_second:
        drained = await run_subprocess("drain", str(table), "--instance", SECOND, "--deadline", "60s",
                                       "--server", oam)
        assert drained.code == 0, drained
        assert f"fan-out instances drained: {SECOND}" in drained.out, drained
        await eventually(lambda: bool(on_second.go_aways), timeout=20, what="a GoAway to the drained instance's client")
        assert on_second.go_aways[0].reason == "admin"
        await eventually(lambda: _reported(system, {first: True, SECOND: False}), timeout=20,
                         interval=0.2, what=f"{SECOND} to report itself draining")

        # The other instance's client keeps streaming: new changes reach it, and it never heard of the drain.
        system.sql(f"INSERT INTO {table} (id, name, qty) SELECT g, 'after drain ' || g, g FROM "
                   "generate_series(1001, 1050) g")
        system.sql(f"UPDATE {table} SET qty = -qty WHERE id <= 20")
        await eventually(lambda: _equals_table(system, on_first), timeout=30,
                         what="the other instance's client to follow the changes made after the drain")
        assert on_first.go_aways == []

        # The first instance is now the last ready one: by id, by table and by CLI the drain is refused.
        for request in (oam_pb2.DrainReplicationRequest(instance_id=first),
                        oam_pb2.DrainReplicationRequest(schema=table.schema, table=table.name)):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await system.oam("DrainReplication", request)
            assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert f"no ready fan-out instance for {table} (ready: {first})" in (refused.value.details() or "")
            assert "force=true" in (refused.value.details() or "")
        refused_cli = await run_subprocess("drain", "--instance", first, "--server", oam)
        assert refused_cli.code != 0 and "--force" in refused_cli.err, refused_cli
        assert on_first.go_aways == [] and (await ready_instances(system))[first]

        forced = await system.oam("DrainReplication", oam_pb2.DrainReplicationRequest(
            instance_id=first, force=True, drain_deadline_seconds=60))
        assert forced.accepted and list(forced.drained_instances) == [first], forced
        assert forced.message.startswith(f"forced: no ready fan-out instance is left for {table}")
        await eventually(lambda: bool(on_first.go_aways), timeout=20, what="a GoAway once the drain is forced")


async def _two_ready(system: System) -> bool:
    ready = await ready_instances(system)
    return len(ready) == 2 and all(ready.values())


async def _reported(system: System, expected: dict[str, bool]) -> bool:
    return await ready_instances(system) == expected


def _equals_table(system: System, replica: WatchedReplica) -> bool:
    return replica.rows() == table_rows(system.dsn, system.table)

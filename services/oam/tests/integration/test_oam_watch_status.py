"""WatchStatus and GetTableSchema on real PostgreSQL, NATS and Redis, with the real ingest, fan-out and query.

The services run in-process (their own build() and run()), OAM serves over a real grpc.aio server. Heartbeat
intervals are 30 s, so every transition a watcher sees was reported at once by the instances (poke).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
from laredo.v1 import oam_pb2, oam_pb2_grpc
from laredo_core.config import LaredoSettings, load_settings
from laredo_fanout.main import build as build_fanout
from laredo_ingest.main import build as build_ingest
from laredo_query.main import build as build_query
from laredo_testing.eventually import eventually

from laredo_oam.main import build as build_oam

pytestmark = pytest.mark.integration

P = oam_pb2.PipelineState
STREAMING, BASELINING = P.Value("PIPELINE_STATE_STREAMING"), P.Value("PIPELINE_STATE_BASELINING")


def write_config(path: Path, *, dsn: str, nats_url: str, redis_url: str, name: str, users: str, orders: str,
                 query: bool) -> LaredoSettings:
    users_targets = "{ type = replication-fanout }" + (", { type = indexed-memory }" if query else "")
    path.write_text(f"""
sources {{ pg {{ type = postgresql, connection = {json.dumps(dsn)}, slot_name = slot_{name}, status_interval = 1s,
               reconnect {{ initial_backoff = 100ms, max_backoff = 1s }} }} }}
tables = [
  {{ source = pg, schema = public, table = {users}, targets = [ {users_targets} ] }},
  {{ source = pg, schema = public, table = {orders}, targets = [ {{ type = replication-fanout }} ] }}
]
stream {{ nats_url = {json.dumps(nats_url)}, subject_prefix = {name} }}
redis {{ url = {json.dumps(redis_url)}, key_prefix = {name} }}
ingest {{ health_host = 127.0.0.1, health_port = 0, heartbeat_interval = 30s }}
fanout {{ grpc {{ host = 127.0.0.1, port = 0 }}, health_host = 127.0.0.1, health_port = 0, status_interval = 30s,
          instance_id = fanout-1 }}
query {{ grpc {{ host = 127.0.0.1, port = 0 }}, health_host = 127.0.0.1, health_port = 0, status_interval = 30s,
         instance_id = query-1 }}
""")
    return load_settings(path, env={})


@dataclass
class Deployment:
    dsn: str
    settings: LaredoSettings
    users: str
    orders: str
    unique: str
    channel: grpc.aio.Channel | None = None
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def stub(self) -> oam_pb2_grpc.TableSyncOAMStub:
        assert self.channel is not None
        return oam_pb2_grpc.TableSyncOAMStub(self.channel)

    def pipeline(self, table: str, target: str = "replication-fanout") -> str:
        return f"pg:public.{table}:{target}"

    def run(self, app: Any) -> None:
        self.tasks.append(asyncio.create_task(app.run(self.stop)))

    async def start_oam(self) -> None:
        oam = build_oam(self.settings, grpc_host="127.0.0.1", grpc_port=0, health_host="127.0.0.1", health_port=0)
        self.run(oam)
        await asyncio.wait_for(oam.started.wait(), 10)
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{oam.grpc_port}")

    async def start_targets(self, query: bool) -> None:
        fanout = build_fanout(self.settings)
        self.run(fanout)
        await asyncio.wait_for(fanout.started.wait(), 10)
        if query:
            app = build_query(self.settings)
            self.run(app)
            await asyncio.wait_for(app.started.wait(), 10)

    def start_ingest(self) -> None:
        self.run(build_ingest(self.settings, state_bucket=f"{self.unique}_state"))

    def sql(self, *statements: str) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)


@pytest.fixture
async def deployment(pg_dsn: str, nats_url: str, redis_url: str, unique_name: str,
                     tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Deployment]:
    users, orders = f"{unique_name}_users", f"{unique_name}_orders"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for table in (users, orders):
            conn.execute(f"CREATE TABLE public.{table} (id bigint PRIMARY KEY, name text NOT NULL, qty int)")
            conn.execute(f"INSERT INTO public.{table} SELECT g, 'row ' || g, g FROM generate_series(1, 50) g")
    settings = write_config(tmp_path / "laredo.conf", dsn=pg_dsn, nats_url=nats_url, redis_url=redis_url,
                            name=unique_name, users=users, orders=orders, query=getattr(request, "param", True))
    deployed = Deployment(pg_dsn, settings, users, orders, unique_name)
    try:
        yield deployed
    finally:
        if deployed.channel is not None:
            await deployed.channel.close()
        deployed.stop.set()
        await asyncio.wait_for(asyncio.gather(*deployed.tasks, return_exceptions=True), 30)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                         "WHERE slot_name = %s AND NOT active", (f"slot_{unique_name}",))


@dataclass
class Watching:
    """One WatchStatus stream read in the background."""

    call: Any
    received: list[oam_pb2.WatchStatusResponse] = field(default_factory=list)
    task: asyncio.Task[None] | None = None

    async def start(self) -> Watching:
        await asyncio.wait_for(self.call.initial_metadata(), 10)  # the watch is in place

        async def read() -> None:
            async for response in self.call:
                self.received.append(response)

        self.task = asyncio.create_task(read())
        return self

    def of(self, kind: str) -> list[Any]:
        return [getattr(r, kind) for r in self.received if r.WhichOneof("event") == kind]

    def pipeline_states(self, pipeline_id: str) -> list[tuple[int, int]]:
        return [(e.old_state, e.new_state) for e in self.of("pipeline_state_change") if e.pipeline_id == pipeline_id]

    def rows(self, where: Callable[[Any], bool] = lambda e: True) -> list[Any]:
        return [e for e in self.of("row_change") if where(e)]

    async def close(self) -> None:
        self.call.cancel()
        if self.task is not None:
            await asyncio.gather(self.task, return_exceptions=True)


def baselined_then_streaming(moves: list[tuple[int, int]]) -> bool:
    news = [new for _, new in moves]
    return BASELINING in news and STREAMING in news[news.index(BASELINING):] and news[-1] == STREAMING


async def test_watch_status_shows_baselining_then_streaming_and_row_changes_as_filtered(
        deployment: Deployment) -> None:
    d = deployment
    users_fanout, users_query = d.pipeline(d.users), d.pipeline(d.users, "indexed-memory")
    orders_fanout = d.pipeline(d.orders)
    await d.start_oam()
    await d.start_targets(query=True)
    everything = await Watching(d.stub.WatchStatus(oam_pb2.WatchStatusRequest())).start()
    by_table = await Watching(d.stub.WatchStatus(oam_pb2.WatchStatusRequest(tables=[f"public.{d.users}"]))).start()
    by_pipeline = await Watching(d.stub.WatchStatus(oam_pb2.WatchStatusRequest(pipeline_ids=[orders_fanout]))).start()
    try:
        d.start_ingest()
        await eventually(lambda: all(baselined_then_streaming(everything.pipeline_states(p))
                                     for p in (users_fanout, users_query, orders_fanout)),
                         timeout=60, what=f"every pipeline BASELINING then STREAMING; got {everything.received}")
        for pipeline in (users_fanout, users_query, orders_fanout):
            moves = everything.pipeline_states(pipeline)
            assert all(old == moves[i - 1][1] for i, (old, _) in enumerate(moves) if i), moves  # continuous
        await eventually(lambda: [(e.old_state, e.new_state) for e in everything.of("service_state_change")][-1:]
                         == [(oam_pb2.SERVICE_STATE_BASELINING, oam_pb2.SERVICE_STATE_STREAMING)],
                         what="the service BASELINING -> STREAMING")
        [connected] = everything.of("source_state_change")
        assert (connected.source_id, connected.event_type) == ("pg", "connected"), connected

        users_table = f"public.{d.users}"
        d.sql(f"INSERT INTO {users_table} VALUES (1001, 'new', 1)",
              f"UPDATE {users_table} SET qty = 2 WHERE id = 1001", f"DELETE FROM {users_table} WHERE id = 1001")
        await eventually(lambda: len(everything.rows()) == 6, what="three changes of users, for its two pipelines")
        d.sql(f"INSERT INTO public.{d.orders} VALUES (2001, 'order', 1)")
        await eventually(lambda: everything.rows(lambda e: e.table == d.orders), what="the change of orders")
        d.sql(f"INSERT INTO {users_table} VALUES (1002, 'after', 1)")  # a barrier for the users watcher
        await eventually(lambda: len(by_table.rows()) == 8, what="the users watcher's eight row changes")
        await eventually(lambda: by_pipeline.rows(), what="the orders watcher's row change")
    finally:
        for watching in (everything, by_table, by_pipeline):
            await watching.close()

    users_rows = everything.rows(lambda e: e.table == d.users)
    assert [(e.pipeline_id, e.action) for e in users_rows[:6]] == [
        (p, action) for action in ("INSERT", "UPDATE", "DELETE") for p in (users_fanout, users_query)]
    for first, second in zip(users_rows[:6:2], users_rows[1:6:2]):
        assert (first.position, first.xid) == (second.position, second.xid) and first.xid > 0
        assert first.schema == "public" and ":" in first.position
    assert len({e.xid for e in users_rows[:6]}) == 3, "one transaction per statement"

    # The table filter: users' pipelines only, state and rows; service and source events still arrive.
    assert {e.table for e in by_table.rows()} == {d.users}
    assert {e.pipeline_id for e in by_table.of("pipeline_state_change")} == {users_fanout, users_query}
    assert by_table.of("service_state_change") and by_table.of("source_state_change")
    # The pipeline filter: the orders fan-out pipeline only.
    assert [(e.pipeline_id, e.action) for e in by_pipeline.rows()] == [(orders_fanout, "INSERT")]
    assert {e.pipeline_id for e in by_pipeline.of("pipeline_state_change")} == {orders_fanout}
    assert baselined_then_streaming(by_pipeline.pipeline_states(orders_fanout))
    assert by_pipeline.of("service_state_change") and by_pipeline.of("source_state_change")
    assert all(r.HasField("timestamp") for r in everything.received)


@pytest.mark.parametrize("deployment", [False], indirect=True, ids=["fanout-only"])
async def test_get_table_schema_answers_with_the_columns_a_running_fanout_reports(deployment: Deployment) -> None:
    d = deployment
    await d.start_oam()
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await d.stub.GetTableSchema(oam_pb2.GetTableSchemaRequest(schema="public", table=d.users), timeout=5)
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    await d.start_targets(query=False)
    d.start_ingest()

    async def columns() -> list[tuple[int, str, str, bool, int]]:
        response = await d.stub.GetTableSchema(oam_pb2.GetTableSchemaRequest(table=f"public.{d.users}"), timeout=5)
        return [(c.ordinal_position, c.column_name, c.data_type, c.not_null, c.primary_key_ordinal)
                for c in response.columns]

    reported = await eventually(columns, timeout=60, what="the columns reported by the fan-out instance")
    assert reported == [(1, "id", "int8", True, 1), (2, "name", "text", True, 0), (3, "qty", "int4", False, 0)]

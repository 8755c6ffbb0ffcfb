"""WatchStatus through a Redis outage (a private Redis stopped and restarted empty): no bogus events."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import grpc
import pytest
from laredo.v1 import oam_pb2, oam_pb2_grpc
from laredo_core.config import load_settings
from laredo_core.coordination.heartbeat import InstanceHeartbeat
from laredo_core.coordination.redis_store import RedisCoordinationStore
from laredo_testing.eventually import eventually
from laredo_testing.servers import RedisServer

from laredo_oam.adapters.memory import MemoryChangeTail
from laredo_oam.main import build

pytestmark = pytest.mark.integration


class Reported:
    def __init__(self, **status: Any) -> None:
        self.status = dict(status)

    def __call__(self) -> Mapping[str, Any]:
        return dict(self.status)


async def test_a_redis_outage_and_empty_restart_emit_no_state_change(tmp_path: Path, unique_name: str) -> None:
    with RedisServer() as redis_server:
        path = tmp_path / "laredo.conf"
        path.write_text(f"""
sources {{ pg {{ type = postgresql, connection = "host=127.0.0.1 dbname=app" }} }}
tables = [ {{ source = pg, table = users, targets = [ {{ type = replication-fanout }} ] }} ]
redis {{ url = "{redis_url(redis_server)}", key_prefix = {unique_name} }}
""")
        app = build(load_settings(path, env={}), change_tail=MemoryChangeTail(), grpc_host="127.0.0.1", grpc_port=0,
                    health_host="127.0.0.1", health_port=0)
        stop = asyncio.Event()
        oam = asyncio.create_task(app.run(stop))
        store = RedisCoordinationStore(redis_url(redis_server), unique_name)
        fanout = Reported(ready=True, tables={"public.users": {"baseline_complete": True, "rows": 1}})
        beats = [InstanceHeartbeat(store, "ingest", "i1", Reported(source="pg", phase="streaming", baseline_complete=True),
                                   interval=1.0, ttl=3.0),
                 InstanceHeartbeat(store, "fanout", "f1", fanout, interval=1.0, ttl=3.0)]
        beating = [asyncio.create_task(b.run()) for b in beats]
        call = None
        try:
            await asyncio.wait_for(app.started.wait(), 10)
            async with grpc.aio.insecure_channel(f"127.0.0.1:{app.grpc_port}") as channel:
                stub = oam_pb2_grpc.TableSyncOAMStub(channel)

                async def streaming() -> bool:
                    status = await stub.GetStatus(oam_pb2.GetStatusRequest(), timeout=5)
                    return status.state == oam_pb2.SERVICE_STATE_STREAMING

                await eventually(streaming, what="both instances registered")
                call = stub.WatchStatus(oam_pb2.WatchStatusRequest())
                await asyncio.wait_for(call.initial_metadata(), 10)
                assert app.watch is not None
                redis_server.stop()
                await eventually(lambda: app.watch.store_reachable is False, what="the watch noticing the outage")
                for task in beating:  # the instances come back only after OAM has read the empty Redis
                    task.cancel()
                await asyncio.gather(*beating, return_exceptions=True)
                redis_server.start()  # empty
                await eventually(lambda: app.watch.store_reachable, what="the watch reading the empty Redis")
                beating[:] = [asyncio.create_task(b.run()) for b in beats]
                await eventually(streaming, what="the instances registered again")
                # A real change as a barrier: it must be the first thing the watcher hears.
                fanout.status["tables"] = {"public.users": {"baseline_complete": False, "rows": 0}}
                beats[1].poke()
                first = await asyncio.wait_for(call.read(), 10)
                assert first.WhichOneof("event") == "pipeline_state_change", first
                assert (first.pipeline_state_change.old_state, first.pipeline_state_change.new_state) == (
                    oam_pb2.PIPELINE_STATE_STREAMING, oam_pb2.PIPELINE_STATE_BASELINING)
        finally:
            if call is not None:
                call.cancel()
            for task in beating:
                task.cancel()
            await asyncio.gather(*beating, return_exceptions=True)
            stop.set()
            await asyncio.wait_for(oam, 10)
            await store.aclose()


def redis_url(server: RedisServer) -> str:
    return server.url

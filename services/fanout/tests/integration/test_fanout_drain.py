"""Drain on real components: SIGTERM to `laredo-fanout --drain-grace`, and the OAM command through Redis."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import grpc
import pytest
from laredo_testing.eventually import eventually
from laredo_testing.process import free_port

from laredo.replication.v1 import replication_pb2 as rpb
from laredo_core.coordination.ports import CommandKind, CommandStatus
from laredo_core.coordination.redis_store import RedisCoordinationStore
from services.fanout.tests.fanout_testkit import Batches, insert, row
from services.fanout.tests.integration.fanout_cluster import Stream, config_text, fanout_instance, follow

pytestmark = pytest.mark.integration


async def ready_status(port: int) -> int:
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/health/ready") as response:
        return response.status


async def answers_ready(port: int) -> bool:
    try:
        return await ready_status(port) == 200
    except aiohttp.ClientError:
        return False


async def test_sigterm_with_drain_grace(stream: Stream, nats_url: str, unique_name: str, tmp_path: Path) -> None:
    batches = Batches()
    await stream.publish(batches.baseline([row(1)]))
    grpc_port, health_port = free_port(), free_port()
    config = tmp_path / "fanout.conf"
    config.write_text(config_text(nats_url, unique_name).replace(
        "port = 0 }, health_host = 127.0.0.1, health_port = 0",
        f"port = {grpc_port} }}, health_host = 127.0.0.1, health_port = {health_port}"))
    log = (tmp_path / "fanout.log").open("wb")
    process = subprocess.Popen([str(Path(sys.executable).parent / "laredo-fanout"), "--config", str(config),
                                "--drain-grace", "20s"], stdout=log, stderr=subprocess.STDOUT,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        await eventually(lambda: answers_ready(health_port), timeout=20, what="the process to be ready")
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}")
        client = follow(channel, client_id="moving")
        await eventually(lambda: client.replica.snapshot_done, what="the client's snapshot")
        signalled = time.time()
        process.send_signal(signal.SIGTERM)
        await eventually(lambda: client.replica.go_away is not None, what="GoAway after SIGTERM")
        go_away = client.replica.go_away
        assert go_away is not None and go_away.reason == "draining"
        assert abs(go_away.drain_deadline_unix_ms / 1000 - (signalled + 20)) < 5
        assert await ready_status(health_port) == 503  # the load balancer stops sending new clients
        await stream.publish(batches.transaction(insert(row(2))))
        await eventually(lambda: client.replica.sequences == [2], what="streaming goes on while draining")
        assert process.poll() is None
        client.cancel()  # the client moved: the process stops well before the grace period ends
        await channel.close()
        await eventually(lambda: process.poll() is not None, timeout=15, what="the process to exit")
        assert process.returncode == 0 and time.time() - signalled < 15
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)
        log.close()


async def test_oam_drain_command_through_redis(stream: Stream, nats_url: str, unique_name: str, tmp_path: Path,
                                               redis_url: str) -> None:
    await stream.publish(Batches().baseline([row(1)]))
    store = RedisCoordinationStore(redis_url, key_prefix=unique_name)
    operator = RedisCoordinationStore(redis_url, key_prefix=unique_name)
    try:
        async with fanout_instance(tmp_path, nats_url, unique_name, coordination=store, instance_id="fanout-1",
                                   fanout=", status_interval = 200ms") as instance:
            coordinator = instance.app.coordinator
            assert coordinator is not None
            await asyncio.wait_for(coordinator.joined["fanout:fanout-1"].wait(), 10)
            client = follow(instance.channel, client_id="c")
            await eventually(lambda: client.replica.snapshot_done, what="the client's snapshot")
            assert await ready_status(instance.app.health_port) == 200

            deadline_ms = int((time.time() + 1.0) * 1000)
            command_id = await operator.send_command("fanout:fanout-1", CommandKind.DRAIN,
                                                     {"schema": "public", "table": "items",
                                                      "deadline_unix_ms": deadline_ms})
            result = await operator.command_result(command_id, timeout=10)
            assert result is not None and result.status is CommandStatus.SUCCEEDED
            assert result.executed_by == "fanout-1" and result.details["tables"] == ["public.items"]
            await eventually(lambda: client.replica.go_away is not None, what="GoAway from the command")
            assert client.replica.go_away.reason == "admin"  # type: ignore[union-attr]
            assert client.replica.go_away.drain_deadline_unix_ms == deadline_ms  # type: ignore[union-attr]
            assert await ready_status(instance.app.health_port) == 503
            await asyncio.wait_for(client.task, 10)  # the stream ends cleanly at the deadline
            assert client.error is None
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                async for _ in instance.stub.Sync(rpb.SyncRequest(schema="public", table="items")):
                    pass
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE

            async def registered() -> bool:
                instances = await operator.instances("fanout")
                return any(i.instance_id == "fanout-1" and i.status.get("draining") for i in instances)

            await eventually(registered, what="the instance's heartbeat to show the drain")
        assert await operator.instances("fanout") == []  # deregistered on stop
    finally:
        await store.aclose()
        await operator.aclose()

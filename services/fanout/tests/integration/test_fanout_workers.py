"""`laredo-fanout --workers 2` on real NATS: two whole instances on one port, each serving Sync; one that dies
is started again; SIGTERM stops them all."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import aiohttp
import grpc
import pytest
from laredo_testing.eventually import eventually
from laredo_testing.process import child_pids, free_port, free_ports_in_a_row, pid_alive

from services.fanout.tests.fanout_testkit import Batches, as_client_rows, insert, row
from services.fanout.tests.integration.fanout_cluster import Stream, config_text, follow

pytestmark = pytest.mark.integration

OWN_CONNECTION = ("grpc.use_local_subchannel_pool", 1)


async def ready(port: int) -> bool:
    try:
        async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/health/ready") as response:
            return response.status == 200
    except aiohttp.ClientError:
        return False


async def not_ready(port: int) -> bool:
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/health/ready") as response:
        answer = await response.json()
        return response.status == 503 and [w["ready"] for w in answer["workers"]].count(False) == 1


def worker_pids(launcher: int) -> set[int]:
    """The launcher's live children (its workers; their own children are Envoys)."""
    return {pid for pid in child_pids(launcher) if pid_alive(pid)}


async def test_two_workers_share_one_port(stream: Stream, nats_url: str, unique_name: str, tmp_path: Path) -> None:
    batches = Batches()
    await stream.publish(batches.baseline([row(1), row(2)]))
    grpc_port, health_port = free_port(), free_ports_in_a_row(3)  # the launcher's, then each worker's
    config = tmp_path / "fanout.conf"
    store = tmp_path / "snapshots"  # shared by the workers: worker 0 alone takes the final snapshot
    snapshots = f'snapshot {{ interval = 0, store = local, store_config {{ path = "{store}" }} }}'
    config.write_text(config_text(nats_url, unique_name, target=snapshots, fanout=", instance_id = edge").replace(
        "port = 0 }, health_host = 127.0.0.1, health_port = 0",
        f"port = {grpc_port} }}, health_host = 127.0.0.1, health_port = {health_port}"))
    log_path = tmp_path / "fanout.log"
    log = log_path.open("wb")
    process = subprocess.Popen([str(Path(sys.executable).parent / "laredo-fanout"), "--config", str(config),
                                "--workers", "2", "--drain-grace", "0s"], stdout=log, stderr=subprocess.STDOUT,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    followers, channels = [], []
    try:
        await eventually(lambda: ready(health_port), timeout=30, what="the launcher's health port ready")
        assert await ready(health_port + 1) and await ready(health_port + 2)  # ready only once both workers are
        # every new connection is a new draw of the kernel's SO_REUSEPORT hash: both workers are reached (a
        # channel of its own subchannel pool: grpcio otherwise shares one connection between equal channels)
        seen: dict[str, object] = {}
        for _ in range(40):
            channel = grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}", options=[OWN_CONNECTION])
            channels.append(channel)
            client = follow(channel, identify_instance=True)
            followers.append(client)
            await eventually(lambda c=client: c.replica.snapshot_done, what="a client's snapshot")
            seen.setdefault(client.replica.handshake.instance_id, client)
            if len(seen) == 2:
                break
        assert sorted(seen) == ["edge-w0", "edge-w1"]
        assert all(f.replica.rows == as_client_rows([row(1), row(2)]) for f in followers)

        await stream.publish(batches.transaction(insert(row(3))))
        for client in followers:
            await eventually(lambda c=client: 3.0 in c.replica.rows, what="the insert on every worker's clients")

        workers = worker_pids(process.pid)
        assert len(workers) == 2
        killed = min(workers)
        os.kill(killed, signal.SIGKILL)
        await eventually(lambda: not_ready(health_port), timeout=10, what="the launcher unready without a worker")
        await eventually(lambda: len(worker_pids(process.pid) - {killed}) == 2, timeout=30,
                         what="the launcher to start the killed worker again")
        await eventually(lambda: ready(health_port), timeout=30, what="the launcher ready again")

        for client in followers:
            client.cancel()
        workers = worker_pids(process.pid)
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
        assert not any(pid_alive(pid) for pid in workers)
        text = log_path.read_text()
        assert "[worker 0]" in text and "[worker 1]" in text
        assert "exited with code -9" in text  # the killed worker, logged as an error before its restart
        assert len(list(store.rglob("manifest.json"))) == 1, text  # one final snapshot, not one per worker
    finally:
        for channel in channels:
            await channel.close()
        if process.poll() is None:
            process.kill()
            process.wait(10)
        log.close()

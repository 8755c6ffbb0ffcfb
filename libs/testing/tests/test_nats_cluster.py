"""The 3-node JetStream cluster fixture: replicated streams, a leader found, SIGKILLed, re-elected, restarted."""

from __future__ import annotations

import asyncio

import nats
import nats.errors
import pytest
from nats.js import JetStreamContext
from nats.js.api import PubAck, StorageType, StreamConfig

from laredo_testing.nats_cluster import NatsCluster
from laredo_testing.process import pid_alive

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def publish_until_acked(js: JetStreamContext, subject: str, n: int) -> PubAck:
    """Publish message `n` with a Nats-Msg-Id, again after a timeout or 503 (an election): stored once."""
    for _ in range(10):
        try:
            return await js.publish(subject, b"%d" % n, headers={"Nats-Msg-Id": f"m{n}"})
        except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
            continue
    raise AssertionError(f"message {n} was never acknowledged")


async def test_replicated_stream_survives_its_leader_being_killed_and_catches_up_on_restart(
        nats_cluster: NatsCluster, unique_name: str) -> None:
    assert len(nats_cluster.urls) == 3 and nats_cluster.url == ",".join(nats_cluster.urls)
    nc = await nats.connect(servers=list(nats_cluster.urls), max_reconnect_attempts=-1, reconnect_time_wait=0.2)
    try:
        js = nc.jetstream(timeout=5)
        subject = f"{unique_name}.a"
        await js.add_stream(StreamConfig(name=unique_name, subjects=[f"{unique_name}.>"],
                                         storage=StorageType.FILE, num_replicas=3))
        for i in range(50):
            await js.publish(subject, b"%d" % i, headers={"Nats-Msg-Id": f"m{i}"})
        # The cluster's methods block (HTTP polls, waits): in threads, so the client notices the kill at once.
        leader = await asyncio.to_thread(nats_cluster.stream_leader, unique_name)
        info = await asyncio.to_thread(nats_cluster.stream_cluster, unique_name)
        assert leader.running and info is not None and info["leader"] == leader.server_name

        pid = await asyncio.to_thread(leader.kill)
        assert not pid_alive(pid) and not leader.running
        successor = await asyncio.to_thread(nats_cluster.stream_leader, unique_name)
        assert successor is not leader
        for i in range(50, 100):
            ack = await publish_until_acked(js, subject, i)
        assert ack.seq == 100, "every acknowledged message is kept through the failover, each once"

        await asyncio.to_thread(leader.start)
        state = await asyncio.to_thread(nats_cluster.wait_stream_replicated, unique_name, 3)
        assert (state["messages"], state["last_seq"]) == (100, 100)
    finally:
        await nc.close()


def test_cluster_stops_every_node_by_pid_and_removes_its_stores() -> None:
    cluster = NatsCluster(3, name="closing")
    with cluster:
        pids = [node.pid for node in cluster.nodes]
        stores = [node.run_dir for node in cluster.nodes]
        assert all(pid is not None and pid_alive(pid) for pid in pids)
    assert not any(pid_alive(pid) for pid in pids if pid is not None)
    assert not any(path.exists() for path in stores)

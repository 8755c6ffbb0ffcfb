"""The 3-node JetStream cluster fixture: replicated streams, a leader found, SIGKILLed, re-elected, restarted."""

from __future__ import annotations

import nats
import pytest
from nats.js.api import StorageType, StreamConfig

from laredo_testing.nats_cluster import NatsCluster
from laredo_testing.process import pid_alive

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def test_replicated_stream_survives_its_leader_being_killed_and_catches_up_on_restart(
        nats_cluster: NatsCluster, unique_name: str) -> None:
    assert len(nats_cluster.urls) == 3 and nats_cluster.url == ",".join(nats_cluster.urls)
    nc = await nats.connect(servers=list(nats_cluster.urls), max_reconnect_attempts=-1, reconnect_time_wait=0.2)
    try:
        js = nc.jetstream(timeout=10)
        await js.add_stream(StreamConfig(name=unique_name, subjects=[f"{unique_name}.>"],
                                         storage=StorageType.FILE, num_replicas=3))
        for i in range(50):
            await js.publish(f"{unique_name}.a", b"%d" % i)
        leader = nats_cluster.stream_leader(unique_name)
        assert leader.running and nats_cluster.stream_cluster(unique_name)["leader"] == leader.server_name

        pid = leader.kill()
        assert not pid_alive(pid) and not leader.running
        successor = nats_cluster.stream_leader(unique_name)
        assert successor is not leader
        for i in range(50, 100):
            ack = await js.publish(f"{unique_name}.a", b"%d" % i)
        assert ack.seq == 100, "every acknowledged message is kept through the failover"

        leader.start()
        state = nats_cluster.wait_stream_replicated(unique_name, replicas=3)
        assert (state["messages"], state["last_seq"]) == (100, 100)
        assert leader.url in nats_cluster.urls
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

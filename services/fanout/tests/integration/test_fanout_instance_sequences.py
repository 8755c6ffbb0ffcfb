"""Journal sequences are instance-local, on real NATS, gRPC and fan-out instances behind a load balancer.

Instance "restored" starts from a snapshot service snapshot, so its journal numbers the same changes 100 lower
than instance "from-start", which consumed the stream from its beginning. A client whose sequence came from
"from-start" and whose position "restored" has pruned, landing on "restored", would get a DELTA after the
wrong entry (a gap of 100 changes) if the sequence counted there; it gets a full snapshot. On its own instance
the same client resumes by its sequence.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from laredo_testing.eventually import eventually

from laredo.replication.v1 import replication_pb2 as rpb
from laredo_client import BackoffPolicy, LaredoClient
from laredo_kernel.position import Position
from laredo_core.snapshots.local_store import LocalSnapshotStore
from libs.client.tests.tcp_balancer import TcpBalancer
from services.fanout.tests.fanout_testkit import Batches, row, update
from services.fanout.tests.integration.fanout_cluster import Stream, fanout_instance, follow
from services.fanout.tests.integration.test_fanout_foreign_snapshots import service_snapshot, store_target

pytestmark = pytest.mark.integration


class Recorder:
    """A StreamObserver: each stream's request and handshake."""

    def __init__(self) -> None:
        self.requests: list[rpb.SyncRequest] = []
        self.handshakes: list[rpb.SyncHandshake] = []

    def opened(self, stream: str, request: rpb.SyncRequest) -> None:
        self.requests.append(request)

    def received(self, stream: str, message: bytes) -> None:
        parsed = rpb.SyncResponse.FromString(message)
        if parsed.WhichOneof("message") == "handshake":
            self.handshakes.append(parsed.handshake)

    def closed(self, stream: str) -> None:
        return None


def client_for(address: str, path: Path, recorder: Recorder) -> LaredoClient:
    return LaredoClient(address, "public", "items", local_snapshot_path=path, client_id="app",
                        backoff=BackoffPolicy(initial=0.05, maximum=0.2), heartbeat_timeout=5,
                        stream_observer=recorder)


def table(client: LaredoClient) -> dict[Any, dict[str, Any]]:
    return {r["id"]: r for r in client.all()}


async def test_a_sequence_resumes_on_its_own_instance_and_not_on_another(
        stream: Stream, nats_url: str, unique_name: str, tmp_path: Path) -> None:
    batches, model = Batches(), {i: row(i) for i in range(1, 101)}

    async def change(count: int) -> None:
        for _ in range(count):
            n = len(changes) + 1
            changes.append(n)
            model[n % 100 + 1] = row(n % 100 + 1, f"v{n}")
            await stream.publish(batches.transaction(update(model[n % 100 + 1])))

    changes: list[int] = []
    await stream.publish(batches.baseline(list(model.values()), chunk_rows=50))
    snapshots = tmp_path / "snapshots"
    async with fanout_instance(tmp_path, nats_url, unique_name, name="from-start",
                               target="journal { max_entries = 10000 }") as from_start:
        replica = from_start.app.targets.replicas[0]
        await eventually(lambda: replica.ready and replica.journal.current_sequence == 100, what="the baseline")
        await service_snapshot(LocalSnapshotStore(str(snapshots)), replica)
        async with fanout_instance(tmp_path, nats_url, unique_name, name="restored",
                                   target=store_target(snapshots, restore=True) + " journal { max_entries = 20 }"
                                   ) as restored:
            other = restored.app.targets.replicas[0]
            await eventually(lambda: other.ready, what="the restored instance")
            assert other.journal.current_sequence == 0, "it numbers from its snapshot on"
            balancer = TcpBalancer(from_start.address)
            await balancer.start()
            recorder, path = Recorder(), tmp_path / "app" / "items.json"
            client = client_for(balancer.address, path, recorder)
            try:
                await client.start()
                await client.await_ready(15)
                await change(5)
                await eventually(lambda: client.last_sequence == 105, what="five changes on from-start")
                first = recorder.handshakes[0]
                assert (first.instance_id, first.journal_epoch) == (from_start.app.targets.instance_id,
                                                                    replica.journal.epoch)

                await balancer.sever()  # a reconnect to the same instance resumes by sequence
                await eventually(lambda: len(recorder.handshakes) == 2, what="the reconnect's handshake")
                request, handshake = recorder.requests[1], recorder.handshakes[1]
                assert (request.last_known_sequence, request.last_known_instance_id,
                        request.last_known_journal_epoch) == (105, first.instance_id, first.journal_epoch)
                assert (handshake.mode, handshake.resume_from_sequence) == (rpb.SYNC_MODE_DELTA, 105)
                await change(1)
                await eventually(lambda: client.last_sequence == 106 and table(client) == model,
                                 what="the resumed stream live")
            finally:
                await client.stop()

            # While the client is away, "restored" passes sequence 106 and prunes the client's position.
            position = client.last_source_position
            await change(120)
            await eventually(lambda: (other.journal.current_sequence, replica.journal.current_sequence) == (126, 226),
                             what="both instances applied the changes")
            assert other.journal.first_retained_sequence - 1 <= 106, "106 is a sequence 'restored' still holds"
            assert other.journal.resume_after_position(Position.parse(position)) is None, "the position is not"

            balancer.backend = restored.address
            again = client_for(balancer.address, path, recorder)
            try:
                await again.start()
                await again.await_ready(15)
                request, handshake = recorder.requests[-1], recorder.handshakes[-1]
                assert (request.last_known_sequence, request.last_known_instance_id) == (106, first.instance_id)
                assert handshake.instance_id == restored.app.targets.instance_id
                assert handshake.mode == rpb.SYNC_MODE_FULL_SNAPSHOT, "another instance's sequence is not resumed"
                await eventually(lambda: table(again) == model, what="the client equals the table")
                assert again.last_sequence == 126 and again.stats.sequence_gaps == 0
            finally:
                await again.stop()
                await balancer.stop()

            # The same question without the client library: a bare DELTA after 106 would skip 100 changes.
            raw = follow(restored.channel, last_known_sequence=106, last_known_instance_id=first.instance_id,
                         last_known_journal_epoch=first.journal_epoch, last_known_source_position=position)
            await eventually(lambda: raw.replica.snapshot_done, what="a full snapshot for a foreign sequence")
            assert raw.replica.handshake is not None and raw.replica.handshake.mode == rpb.SYNC_MODE_FULL_SNAPSHOT
            raw.cancel()

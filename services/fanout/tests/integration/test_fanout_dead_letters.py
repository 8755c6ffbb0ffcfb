"""Two fan-out instances on real NATS: what neither can apply is stored once (not once per instance), both keep
applying, and both answer a replay command alike."""

from __future__ import annotations

from pathlib import Path

import pytest
from laredo_testing.eventually import eventually

from laredo_core.coordination.memory import InMemoryCoordinationStore
from laredo_core.coordination.ports import CommandKind, CommandStatus
from laredo_core.deadletters.model import DeadLetterPage, PipelineId
from laredo_core.deadletters.nats_store import NatsDeadLetterStore
from laredo_core.deadletters.replay import ReplayOutcome, ReplayReport, replay_args
from laredo_kernel.tuples import UNCHANGED
from services.fanout.tests.fanout_testkit import SOURCE, TABLE, Batches, insert, row
from services.fanout.tests.integration.fanout_cluster import Stream, fanout_instance

pytestmark = pytest.mark.integration

PIPELINE = PipelineId(SOURCE, TABLE, "replication-fanout")


async def test_two_instances_store_each_failure_once_keep_applying_and_replay_alike(
        stream: Stream, tmp_path: Path, nats_url: str, unique_name: str) -> None:
    coordination = InMemoryCoordinationStore(block=0.05)
    store = NatsDeadLetterStore([nats_url], unique_name)
    batches = Batches()
    await stream.publish(batches.baseline([row(1)]), b"\x00\xffcorrupt",
                         batches.transaction(insert({"id": UNCHANGED, "name": "no key"}), insert(row(2))))
    try:
        async with fanout_instance(tmp_path, nats_url, unique_name, name="a", coordination=coordination,
                                   instance_id="a") as a, \
                fanout_instance(tmp_path, nats_url, unique_name, name="b", coordination=coordination,
                                instance_id="b") as b:
            for instance in (a, b):
                await eventually(lambda i=instance: len(i.app.targets.replicas[0].state) == 2,  # type: ignore[misc]
                                 what="both rows on every instance")
                await eventually(lambda i=instance: i.app.dead_letters.writer.pending == 0  # type: ignore[union-attr]
                                 and i.app.dead_letters.writer.stats.written == 2,  # type: ignore[union-attr]
                                 what="the instance's letters written")
            page: DeadLetterPage = await store.list(PIPELINE)
            assert page.total == 2, "each failure is stored once, whichever instance wrote it first"
            assert [x.letter_id for x in page.letters] == ["s4-m", "s5-c0"]
            assert {x.recorded_by for x in page.letters} <= {"fanout:a", "fanout:b"}

            coordinators = [i.app.coordinator for i in (a, b) if i.app.coordinator is not None]
            await eventually(lambda: all(e.is_set() for c in coordinators for e in c.joined.values()),
                             what="both instances reading commands")
            reports = []
            for instance_id in ("a", "b"):
                command_id = await coordination.send_command(f"fanout:{instance_id}", CommandKind.REPLAY_DEAD_LETTERS,
                                                             replay_args(PIPELINE, page.letters))
                result = await coordination.command_result(command_id, 10)
                assert result is not None and result.status is CommandStatus.SUCCEEDED, result
                reports.append(ReplayReport.from_details(result.details))
            assert reports[0] == reports[1], "instances that failed alike replay alike"
            assert set(reports[0].outcomes.values()) == {ReplayOutcome.FAILED}
            assert "still does not decode" in reports[0].reasons["s4-m"]
            assert "lacks the value of key column 'id'" in reports[0].reasons["s5-c0"]
    finally:
        await store.purge(PIPELINE)
        await store.close()

"""Redis stopped and restarted empty under a running instance: calls fail fast, loops carry on, nothing is stuck."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from laredo_core.coordination.heartbeat import InstanceHeartbeat, LeaderLease
from laredo_core.coordination.ports import (
    Command,
    CommandKind,
    CommandResult,
    CommandStatus,
    CoordinationUnavailable,
    Event,
    InstanceStatus,
)
from laredo_core.coordination.redis_store import RedisCoordinationStore
from laredo_testing.eventually import eventually
from laredo_testing.servers import RedisServer

pytestmark = pytest.mark.integration

FAIL_FAST_SECONDS = 3.0


@pytest.fixture
def private_redis() -> Iterator[RedisServer]:
    """A Redis of this test's own, so stopping it leaves the session's shared server alone."""
    with RedisServer() as server:
        yield server


def calls_to_refuse(store: RedisCoordinationStore) -> dict[str, Callable[[], Awaitable[Any]]]:
    command = Command("c1", "ingest:src1", CommandKind.PAUSE)
    return {
        "heartbeat": lambda: store.heartbeat(InstanceStatus("ingest", "other"), 5.0),
        "deregister": lambda: store.deregister("ingest", "other"),
        "instances": lambda: store.instances(),
        "acquire_lease": lambda: store.acquire_lease("src2", "x", 5.0),
        "renew_lease": lambda: store.renew_lease("src2", "x", 5.0),
        "release_lease": lambda: store.release_lease("src2", "x"),
        "lease_holder": lambda: store.lease_holder("src2"),
        "send_command": lambda: store.send_command("ingest:src1", CommandKind.PAUSE),
        "complete_command": lambda: store.complete_command(command, CommandResult("c1", CommandStatus.SUCCEEDED)),
        "command_result": lambda: store.command_result("c1", 5.0),
        "publish_event": lambda: store.publish_event(Event("state")),
        "join commands": lambda: store.commands("ingest:src1", "late").join(),
        "join events": lambda: store.events().join(),
    }


async def test_a_redis_outage_is_survived(private_redis: RedisServer, unique_name: str,
                                          caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="laredo_core.coordination")
    store = RedisCoordinationStore(private_redis.url, unique_name, claim_idle=2.0)
    beats = 0

    def status() -> dict[str, Any]:
        nonlocal beats
        beats += 1
        return {"state": "STREAMING"}

    heartbeat = InstanceHeartbeat(store, "ingest", "i1", status, interval=0.2, ttl=2.0)
    lease = LeaderLease(store, "ingest:src1", "i1", ttl=2.0, renew_every=0.3)
    commands, events = store.commands("ingest:src1", "i1"), store.events()
    received: list[Command] = []
    watched: list[Event] = []

    async def consume() -> None:
        async for command in commands:
            received.append(command)

    async def watch() -> None:
        async for event in events:
            watched.append(event)

    async def registered() -> bool:
        return [i.instance_id for i in await store.instances("ingest")] == ["i1"]

    await events.join()
    loops = [asyncio.create_task(heartbeat.run()), asyncio.create_task(consume()), asyncio.create_task(watch())]
    tasks = list(loops)  # the loops, and the task that notes the lease's loss
    try:
        assert await lease.acquire(asyncio.Event())
        await eventually(registered, what="i1 to register")
        await store.send_command("ingest:src1", CommandKind.PAUSE)
        await eventually(lambda: len(received) == 1, what="a command before the outage")

        loop = asyncio.get_running_loop()
        lost_at: list[float] = []

        async def note_loss() -> None:  # when the lease was given up, apart from how long the checks below take
            await lease.lost.wait()
            lost_at.append(loop.time())

        tasks.append(asyncio.create_task(note_loss()))
        await asyncio.to_thread(private_redis.stop)
        stopped_at, logged_before_stop = loop.time(), len(caplog.records)
        for name, call in calls_to_refuse(store).items():
            started = loop.time()
            with pytest.raises(CoordinationUnavailable, match=f"Redis at {private_redis.url}"):
                await call()
            assert loop.time() - started < FAIL_FAST_SECONDS, f"{name} took too long to fail"

        await eventually(lambda: bool(lost_at), timeout=5, what="the leader to give up its lease")
        assert lost_at[0] - stopped_at < lease.ttl and not lease.is_leader
        beats_at_cut = beats
        await eventually(lambda: beats >= beats_at_cut + 3, what="heartbeats to go on during the outage")
        assert not any(task.done() for task in loops), "no loop may end because of the outage"

        logged_before_start = len(caplog.records)
        await asyncio.to_thread(private_redis.start)  # same port, no data
        await eventually(registered, what="i1 to register again after Redis came back")
        command_id = await store.send_command("ingest:src1", CommandKind.RESUME)
        await eventually(lambda: [c.command_id for c in received[1:]] == [command_id],
                         what="a command sent after the outage to be delivered")
        assert await asyncio.wait_for(lease.acquire(asyncio.Event()), 5)

        async def event_arrives() -> bool:  # the watcher resubscribes on its own schedule
            await store.publish_event(Event("recovered"))
            return any(e.kind == "recovered" for e in watched)

        await eventually(event_arrives, what="events to reach the watcher after the outage")
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await commands.aclose()
        await events.aclose()
        await lease.release()
        await store.aclose()

    def heartbeat_logs(start: int, end: int | None = None) -> list[str]:
        return [r.getMessage() for r in caplog.records[start:end]
                if r.name.endswith(".heartbeat") and "heartbeat of ingest instance i1" in r.getMessage()]

    # One warning for the whole outage, however many beats failed; then one line when it is over.
    during = heartbeat_logs(logged_before_stop, logged_before_start)
    assert len(during) == 1 and "unavailable" in during[0], during
    after = heartbeat_logs(logged_before_start)
    assert after and "reachable again" in after[0], after

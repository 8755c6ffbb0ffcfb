"""CoordinationStore contract: the same tests against the in-memory fake and the Redis adapter."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from laredo_core.coordination.memory import InMemoryCoordinationStore
from laredo_core.coordination.ports import (
    Command,
    CommandKind,
    CommandResult,
    CommandStatus,
    Event,
    InstanceStatus,
)
from laredo_core.coordination.redis_store import RedisCoordinationStore
from laredo_core.coordination.subscriptions import CommandSubscription
from laredo_testing.eventually import eventually

Store = InMemoryCoordinationStore | RedisCoordinationStore


@dataclass
class StoreBackend:
    """Makes stores sharing one backend: the same fake every time, or a new Redis client on one key prefix
    (like another process). `lose_data()` forgets everything, like a Redis restart without persistence."""

    kind: str
    make: Callable[..., Store]
    lose_data: Callable[[], Awaitable[None]]
    opened: list[Store] = field(default_factory=list)


def _memory_backend() -> StoreBackend:
    made: list[InMemoryCoordinationStore] = []

    def make(**options: Any) -> InMemoryCoordinationStore:
        if not made:
            made.append(InMemoryCoordinationStore(**options))
        return made[0]

    async def lose_data() -> None:
        for store in made:
            store.clear()

    return StoreBackend("memory", make, lose_data)


def _redis_backend(url: str, prefix: str) -> StoreBackend:
    backend: StoreBackend

    def make(**options: Any) -> RedisCoordinationStore:
        # Semantics are tested here, not outage detection (see the outage test, which keeps the defaults):
        # a longer socket timeout keeps a CPU-starved test machine from turning a slow reply into an outage.
        options.setdefault("socket_timeout", 5.0)
        store = RedisCoordinationStore(url, prefix, **options)
        backend.opened.append(store)
        return store

    async def lose_data() -> None:
        store = RedisCoordinationStore(url, prefix)
        try:
            keys = [key async for key in store.client.scan_iter(match=f"{prefix}:*")]
            if keys:
                await store.client.delete(*keys)
        finally:
            await store.aclose()

    backend = StoreBackend("redis", make, lose_data)
    return backend


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.integration)])
async def backend(request: pytest.FixtureRequest, unique_name: str) -> AsyncIterator[StoreBackend]:
    if request.param == "memory":
        yield _memory_backend()
        return
    chosen = _redis_backend(request.getfixturevalue("redis_url"), unique_name)
    yield chosen
    for store in chosen.opened:
        await store.aclose()


async def next_command(commands: AsyncIterator[Command], timeout: float = 10.0) -> Command:
    try:
        return await asyncio.wait_for(anext(commands), timeout)
    except TimeoutError:
        raise AssertionError(f"no command arrived within {timeout:g}s") from None


def succeeded(command: Command, by: str, message: str = "done") -> CommandResult:
    return CommandResult(command.command_id, CommandStatus.SUCCEEDED, message, {"n": 1}, by)


@contextlib.asynccontextmanager
async def consuming(store: Store, subscription: CommandSubscription, name: str,
                    received: list[tuple[str, Command]]) -> AsyncIterator[None]:
    """Run a consumer that records and completes every command it gets."""
    async def consume() -> None:
        async for command in subscription:
            received.append((name, command))
            await store.complete_command(command, succeeded(command, name))

    task = asyncio.create_task(consume())
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await subscription.aclose()


# Registry

async def test_heartbeat_lists_instances_until_their_ttl_lapses(backend: StoreBackend) -> None:
    store = backend.make()
    await store.heartbeat(InstanceStatus("ingest", "i1", {"state": "STREAMING", "lag": [1, 2]},
                                         started_unix_ms=1_700_000_000_000), ttl=1.0)
    await store.heartbeat(InstanceStatus("fanout", "f1", {"clients": 3}), ttl=60.0)

    listed = await store.instances()
    assert [(i.service, i.instance_id) for i in listed] == [("fanout", "f1"), ("ingest", "i1")]
    ingest = await store.instances("ingest")
    assert len(ingest) == 1 and ingest[0].status == {"state": "STREAMING", "lag": [1, 2]}
    assert ingest[0].heartbeat_unix_ms > 0 and ingest[0].started_unix_ms == 1_700_000_000_000

    async def ingest_expired() -> bool:
        return await store.instances("ingest") == []

    await eventually(ingest_expired, timeout=5, what="the ingest instance to expire after its 1 s ttl")
    assert [i.instance_id for i in await store.instances()] == ["f1"]


async def test_heartbeat_replaces_the_status_and_deregister_removes_it(backend: StoreBackend) -> None:
    store = backend.make()
    await store.heartbeat(InstanceStatus("query", "q1", {"rows": 1}), ttl=30.0)
    await store.heartbeat(InstanceStatus("query", "q1", {"rows": 2}), ttl=30.0)
    assert [i.status for i in await store.instances("query")] == [{"rows": 2}]
    await store.deregister("query", "q1")
    assert await store.instances("query") == []


# Leases

async def test_a_lease_has_one_holder_until_released(backend: StoreBackend) -> None:
    store = backend.make()
    assert await store.acquire_lease("src1", "a", ttl=30.0)
    assert not await store.acquire_lease("src1", "b", ttl=30.0)
    assert await store.lease_holder("src1") == "a"
    assert not await store.renew_lease("src1", "b", ttl=30.0)
    assert await store.renew_lease("src1", "a", ttl=30.0)
    assert await store.acquire_lease("src1", "a", ttl=30.0), "the holder may acquire again"

    await store.release_lease("src1", "b")  # not the holder: no effect
    assert await store.lease_holder("src1") == "a"
    await store.release_lease("src1", "a")
    assert await store.lease_holder("src1") is None
    assert await store.acquire_lease("src1", "b", ttl=30.0)


async def test_a_lease_lapses_after_its_ttl(backend: StoreBackend) -> None:
    store = backend.make()
    assert await store.acquire_lease("src1", "a", ttl=1.0)
    assert not await store.acquire_lease("src1", "b", ttl=1.0)
    await eventually(lambda: store.acquire_lease("src1", "b", ttl=30.0), timeout=5,
                     what="b to acquire the lease after a's 1 s ttl")
    assert not await store.renew_lease("src1", "a", ttl=30.0)


# Commands

async def test_each_command_goes_to_exactly_one_consumer_of_a_group(backend: StoreBackend) -> None:
    first, second = backend.make(), backend.make()
    received: list[tuple[str, Command]] = []
    sent = [await first.send_command("ingest:src1", CommandKind.RELOAD, {"schema": "public", "table": f"t{n}"})
            for n in range(20)]
    async with (consuming(first, first.commands("ingest:src1", "c1"), "c1", received),
                consuming(second, second.commands("ingest:src1", "c2"), "c2", received)):
        sent += [await first.send_command("ingest:src1", CommandKind.PAUSE) for _ in range(10)]
        await eventually(lambda: len(received) >= len(sent), timeout=10, what="30 commands to be received")
        results = [await first.command_result(command_id, timeout=5) for command_id in sent]

    ids = [command.command_id for _, command in received]
    assert sorted(ids) == sorted(sent), "every command delivered once, none twice"
    by_id = {command.command_id: command for _, command in received}
    assert by_id[sent[0]].args == {"schema": "public", "table": "t0"}
    for consumer in ("c1", "c2"):  # each consumer gets its share in the order sent
        positions = [sent.index(c.command_id) for name, c in received if name == consumer]
        assert positions == sorted(positions), consumer
    assert all(r is not None and r.status is CommandStatus.SUCCEEDED for r in results)
    assert all(c.target == "ingest:src1" and c.issued_unix_ms > 0 for _, c in received)


async def test_an_unacknowledged_command_goes_to_another_consumer(backend: StoreBackend) -> None:
    first, second = backend.make(claim_idle=0.5), backend.make(claim_idle=0.5)
    dying = first.commands("fanout:f1", "c1")
    command_id = await first.send_command("fanout:f1", CommandKind.SNAPSHOT, {"tables": ["public.t"]})
    taken = await next_command(dying)
    assert taken.command_id == command_id
    await dying.aclose()  # dies without completing it

    survivor = second.commands("fanout:f1", "c2")
    redelivered = await next_command(survivor)
    assert redelivered == taken
    await second.complete_command(redelivered, succeeded(redelivered, "c2"))

    # Once acknowledged it is not handed out again, even after the claim period passed.
    await asyncio.sleep(0.7)
    later_id = await first.send_command("fanout:f1", CommandKind.PAUSE)
    assert (await next_command(survivor)).command_id == later_id
    await survivor.aclose()


async def test_a_restarted_consumer_gets_back_what_it_left_pending(backend: StoreBackend) -> None:
    store = backend.make()
    before = store.commands("ingest:src1", "ingest-1")
    await store.send_command("ingest:src1", CommandKind.RESET, {"drop_publication": True})
    taken = await next_command(before)
    await before.aclose()

    after = store.commands("ingest:src1", "ingest-1")
    assert await next_command(after, timeout=5) == taken
    await after.aclose()


async def test_a_broadcast_reaches_every_group_that_joined(backend: StoreBackend) -> None:
    first, second = backend.make(), backend.make()
    one = first.commands("fanout:*", "f1", group="f1")
    two = second.commands("fanout:*", "f2", group="f2")
    await one.join()
    await two.join()
    command_id = await first.send_command("fanout:*", CommandKind.DRAIN, {"deadline_unix_ms": 5})
    got_one, got_two = await next_command(one), await next_command(two)
    assert got_one.command_id == got_two.command_id == command_id
    await first.complete_command(got_one, succeeded(got_one, "f1"))
    await second.complete_command(got_two, succeeded(got_two, "f2"))

    late = first.commands("fanout:*", "f3", group="f3")
    await late.join()
    later_id = await first.send_command("fanout:*", CommandKind.RESUME)
    assert (await next_command(late)).command_id == later_id, "a new group sees only later broadcasts"
    assert (await next_command(one)).command_id == later_id
    for subscription in (one, two, late):
        await subscription.aclose()


async def test_commands_continue_after_the_store_lost_its_data(backend: StoreBackend) -> None:
    store = backend.make()
    subscription = store.commands("ingest:src1", "c1")
    await store.send_command("ingest:src1", CommandKind.PAUSE)
    before = await next_command(subscription)
    await backend.lose_data()  # like a Redis restart without persistence: streams and groups are gone
    await store.complete_command(before, succeeded(before, "c1"))  # its group is gone: nothing to ack
    assert await store.command_result(before.command_id, timeout=1) is not None

    received: list[Command] = []

    async def receive() -> None:
        received.append(await anext(subscription))

    task = asyncio.create_task(receive())
    command_id = await store.send_command("ingest:src1", CommandKind.RESUME)
    await asyncio.wait_for(task, 10)
    assert [c.command_id for c in received] == [command_id]
    await subscription.aclose()


async def test_command_result_waits_for_the_first_result(backend: StoreBackend) -> None:
    store = backend.make()
    subscription = store.commands("ingest:src1", "c1")
    command_id = await store.send_command("ingest:src1", CommandKind.RELOAD, {"schema": "s", "table": "t"})
    waiter = asyncio.create_task(store.command_result(command_id, timeout=10))
    command = await next_command(subscription)
    assert not waiter.done()
    await store.complete_command(command, succeeded(command, "ingest-1", "reloaded"))
    result = await asyncio.wait_for(waiter, 10)
    assert result is not None
    assert (result.command_id, result.status, result.message, result.details, result.executed_by) == (
        command_id, CommandStatus.SUCCEEDED, "reloaded", {"n": 1}, "ingest-1")
    assert result.finished_unix_ms > 0

    # A redelivered execution completing again does not replace the first result.
    await store.complete_command(command, CommandResult(command_id, CommandStatus.FAILED, "again"))
    again = await store.command_result(command_id, timeout=1)
    assert again is not None and again.message == "reloaded"
    assert await store.command_result("no-such-command", timeout=0.2) is None
    await subscription.aclose()


async def test_bad_input_is_refused_with_a_clear_error(backend: StoreBackend) -> None:
    store = backend.make()
    with pytest.raises(ValueError, match="not JSON-compatible"):
        await store.send_command("ingest:src1", CommandKind.RELOAD, {"when": object()})
    with pytest.raises(ValueError, match="CommandKind"):
        await store.send_command("ingest:src1", "reload")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="service"):
        await store.heartbeat(InstanceStatus("", "i1"), ttl=5.0)
    with pytest.raises(ValueError, match="ttl"):
        await store.acquire_lease("src1", "a", ttl=0)


# Events

async def test_events_reach_every_current_watcher_in_order(backend: StoreBackend) -> None:
    publisher, other = backend.make(), backend.make()
    watchers = [publisher.events(), other.events()]
    for watcher in watchers:
        await watcher.join()
    sent = [Event("pipeline_state", {"source": "src1", "state": state}) for state in ("BASELINING", "STREAMING")]
    for event in sent:
        await publisher.publish_event(event)
    for watcher in watchers:
        got = [await asyncio.wait_for(anext(watcher), 10) for _ in sent]
        assert [(e.kind, e.payload) for e in got] == [(e.kind, e.payload) for e in sent]
        assert all(e.unix_ms > 0 for e in got)
        await watcher.aclose()

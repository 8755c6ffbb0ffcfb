"""Snapshot management over an in-memory store and coordination store: list, inspect, delete, prune, create."""

from __future__ import annotations

import pytest
from laredo_kernel.changes import TableId
from laredo_core.coordination.ports import CoordinationUnavailable
from laredo_core.snapshots.memory_store import MemorySnapshotStore

from laredo_oam.adapters.memory import InMemoryCoordinationStore
from laredo_oam.application.snapshots import SnapshotPlace, Snapshots
from laredo_oam.domain.catalog import Catalog, ConfiguredTable, ConfiguredTarget
from laredo_oam.domain.errors import (
    CommandTimedOut,
    InvalidRequest,
    NotFound,
    PreconditionFailed,
    SnapshotStoreFailed,
)
from services.oam.tests.oam_testkit import beat, catalog, fanout_report
from services.oam.tests.snapshot_testkit import fake_fanout, write_snapshot

USERS, ORDERS = TableId("public", "users"), TableId("public", "orders")


def with_plain_table() -> Catalog:
    """users and orders (fan-out targets with a store) and audit (no snapshot store)."""
    base = catalog()
    return Catalog(base.sources, (*base.tables, ConfiguredTable("pg", TableId("public", "audit"),
                                                                (ConfiguredTarget("indexed-memory"),))))


@pytest.fixture
def store() -> MemorySnapshotStore:
    return MemorySnapshotStore()


@pytest.fixture
def coordination() -> InMemoryCoordinationStore:
    return InMemoryCoordinationStore(block=0.05)


@pytest.fixture
def snapshots(store: MemorySnapshotStore, coordination: InMemoryCoordinationStore) -> Snapshots:
    place = SnapshotPlace(store, "memory", "memory://unit")
    return Snapshots({USERS: place, ORDERS: place}, with_plain_table(), coordination, command_timeout=2.0)


async def test_list_is_newest_first_across_tables_with_filter_and_limit(store: MemorySnapshotStore,
                                                                      snapshots: Snapshots) -> None:
    await write_snapshot(store, USERS, 100.0, snapshot_id="u-old")
    await write_snapshot(store, ORDERS, 200.0, snapshot_id="o-1")
    await write_snapshot(store, USERS, 300.0, snapshot_id="u-new")
    await write_snapshot(store, "archive.gone", 250.0, snapshot_id="g-1")  # no longer configured: still listed
    assert [s.snapshot_id for s in await snapshots.list()] == ["u-new", "g-1", "o-1", "u-old"]
    assert [s.snapshot_id for s in await snapshots.list(limit=2)] == ["u-new", "g-1"]
    assert [s.snapshot_id for s in await snapshots.list("public.users")] == ["u-new", "u-old"]
    assert [(s.table, s.place.location) for s in await snapshots.list(" archive.gone ")] == [
        (TableId("archive", "gone"), "memory://unit")]


async def test_list_rejects_bad_arguments_and_names_what_is_missing(snapshots: Snapshots) -> None:
    with pytest.raises(InvalidRequest, match="table 'users' is malformed: expected 'schema.table'"):
        await snapshots.list("users")
    with pytest.raises(InvalidRequest, match="limit must be 0"):
        await snapshots.list(limit=-1)
    with pytest.raises(NotFound, match="table public.nope is not configured"):
        await snapshots.list("public.nope")
    with pytest.raises(PreconditionFailed, match="table public.audit has no snapshot store.*snapshot \\{ store"):
        await snapshots.list("public.audit")


async def test_find_returns_table_manifest_and_store(store: MemorySnapshotStore, snapshots: Snapshots) -> None:
    written = await write_snapshot(store, ORDERS, 200.0, rows=5, snapshot_id="o-1", user_meta={"why": "test"})
    found = await snapshots.find("o-1")
    assert (found.table, found.manifest, found.place.store, found.target_type) == (
        ORDERS, written, store, "replication-fanout")
    assert found.manifest.size_bytes == sum(p.size_bytes for p in written.parts) > 0
    assert found.manifest.user_meta == {"why": "test"}
    with pytest.raises(NotFound, match="snapshot 'o-2' not found in memory snapshot store memory://unit"):
        await snapshots.find("o-2")
    with pytest.raises(InvalidRequest, match="snapshot_id is required"):
        await snapshots.find(" ")


async def test_delete_removes_the_snapshot(store: MemorySnapshotStore, snapshots: Snapshots) -> None:
    await write_snapshot(store, USERS, 100.0, snapshot_id="u-1")
    await write_snapshot(store, USERS, 200.0, snapshot_id="u-2")
    assert await snapshots.delete("u-1") is True
    assert [s.snapshot_id for s in await snapshots.list()] == ["u-2"]
    with pytest.raises(NotFound, match="snapshot 'u-1' not found"):
        await snapshots.delete("u-1")


async def test_prune_keeps_the_newest_per_table(store: MemorySnapshotStore, snapshots: Snapshots) -> None:
    for i in range(4):
        await write_snapshot(store, USERS, 100.0 + i, snapshot_id=f"u-{i}")
        await write_snapshot(store, ORDERS, 100.0 + i, snapshot_id=f"o-{i}")
    assert await snapshots.prune(3, "public.orders") == 1
    assert await snapshots.prune(2) == 2 + 1
    assert sorted(s.snapshot_id for s in await snapshots.list()) == ["o-2", "o-3", "u-2", "u-3"]
    assert await snapshots.prune(5) == 0
    with pytest.raises(InvalidRequest, match="keep must be at least 1"):
        await snapshots.prune(0)
    with pytest.raises(InvalidRequest, match="malformed"):
        await snapshots.prune(1, "public.")


async def test_without_any_store_every_operation_says_how_to_configure_one(
        coordination: InMemoryCoordinationStore) -> None:
    snapshots = Snapshots({}, with_plain_table(), coordination)
    for call in (snapshots.list(), snapshots.find("x"), snapshots.delete("x"), snapshots.prune(1),
                 snapshots.create([], {})):
        with pytest.raises(PreconditionFailed, match="no snapshot store is configured for any table: add snapshot"):
            await call


async def test_store_failures_name_the_store_and_the_step(store: MemorySnapshotStore, snapshots: Snapshots) -> None:
    await write_snapshot(store, USERS, 100.0, snapshot_id="u-1")
    store.unavailable = True
    with pytest.raises(SnapshotStoreFailed, match="memory snapshot store memory://unit failed while listing its "
                                                  "tables: .*injected fault"):
        await snapshots.list()
    store.unavailable = False
    store._manifests[(USERS, "u-1")] = b"{not json"  # noqa: SLF001 - the fake's storage is the file
    with pytest.raises(SnapshotStoreFailed, match="holds a damaged snapshot \\(reading snapshot 'u-1' of public.users"):
        await snapshots.find("u-1")


async def test_create_asks_a_live_fanout_instance_and_returns_the_id(
        store: MemorySnapshotStore, coordination: InMemoryCoordinationStore, snapshots: Snapshots) -> None:
    await beat(coordination, "fanout", "f-b", fanout_report({"public.users": {}, "public.orders": {}}))
    await beat(coordination, "fanout", "f-a", fanout_report({"public.users": {"ready": False}}))
    clock = [1000.0]
    async with fake_fanout(coordination, "f-b", store, clock=clock) as seen:
        created = await snapshots.create(["public.users"], {"reason": "upgrade"})
    assert created.accepted and created.snapshot_id and "written by f-b" in created.message
    assert [dict(c.args) for c in seen] == [{"tables": ["public.users"], "user_meta": {"reason": "upgrade"}}]
    found = await snapshots.find(created.snapshot_id)
    assert found.table == USERS and found.manifest.user_meta == {"reason": "upgrade"}


async def test_create_several_tables_joins_the_ids_in_request_order(
        store: MemorySnapshotStore, coordination: InMemoryCoordinationStore, snapshots: Snapshots) -> None:
    await beat(coordination, "fanout", "f-a", fanout_report({"public.orders": {}}))
    await beat(coordination, "fanout", "f-b", fanout_report({"public.users": {}}))
    clock = [1000.0]
    async with fake_fanout(coordination, "f-a", store, clock=clock), \
            fake_fanout(coordination, "f-b", store, clock=clock):
        created = await snapshots.create(["public.users", "public.orders", "public.users"], {})
        everything = await snapshots.create([], {})  # every table with a store
    users, orders = created.snapshot_ids
    assert created.accepted and created.snapshot_id == f"{users},{orders}"
    assert ((await snapshots.find(users)).table, (await snapshots.find(orders)).table) == (USERS, ORDERS)
    assert everything.accepted and len(everything.snapshot_ids) == 2


async def test_create_reports_a_table_the_instance_could_not_snapshot(
        store: MemorySnapshotStore, coordination: InMemoryCoordinationStore, snapshots: Snapshots) -> None:
    await beat(coordination, "fanout", "f-a", fanout_report({"public.orders": {}, "public.users": {}}))
    async with fake_fanout(coordination, "f-a", store, clock=[1.0], fail={"public.orders": "not loaded yet"}):
        created = await snapshots.create(["public.users", "public.orders"], {})
    assert not created.accepted and len(created.snapshot_ids) == 1
    assert "public.orders: no snapshot from f-a (failed: not loaded yet)" in created.message


async def test_create_errors(coordination: InMemoryCoordinationStore, snapshots: Snapshots) -> None:
    with pytest.raises(InvalidRequest, match="tables entry 'users' is malformed"):
        await snapshots.create(["users"], {})
    with pytest.raises(NotFound, match="table public.nope is not configured"):
        await snapshots.create(["public.nope"], {})
    with pytest.raises(PreconditionFailed, match="table public.audit has no snapshot store"):
        await snapshots.create(["public.audit"], {})
    with pytest.raises(PreconditionFailed, match="no live fan-out instance serves table public.users"):
        await snapshots.create(["public.users"], {})
    await beat(coordination, "fanout", "f-a", fanout_report({"public.users": {}}))
    quick = Snapshots({USERS: SnapshotPlace(MemorySnapshotStore(), "memory", "m")}, catalog(), coordination,
                      command_timeout=0.1)
    with pytest.raises(CommandTimedOut, match="no answer from fanout:f-a within 0.1s"):
        await quick.create(["public.users"], {})
    coordination.unavailable = True
    with pytest.raises(CoordinationUnavailable):
        await snapshots.create(["public.users"], {})

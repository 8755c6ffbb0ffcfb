"""Snapshots for OAM tests: manifests written into a store as fan-out writes them, and a fake fan-out instance
that answers SNAPSHOT commands by writing one."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Mapping
from typing import Any

from laredo_kernel.changes import ColumnInfo, TableId
from laredo_core.coordination.ports import CommandKind, CommandResult, CommandStatus, CoordinationStore
from laredo_core.snapshots.format import Checksum, SnapshotManifest, encode_part
from laredo_core.snapshots.store import SnapshotStore

COLUMNS = (ColumnInfo("id", 23, "int4", is_identity_key=True, not_null=True, primary_key_ordinal=1),
           ColumnInfo("name", 25, "text"))
_ids = itertools.count(1)


async def write_snapshot(store: SnapshotStore, table: TableId | str, created_at: float, rows: int = 3, *,
                         snapshot_id: str = "", user_meta: Mapping[str, Any] | None = None,
                         position: str = "0/16B3748:3") -> SnapshotManifest:
    """A complete snapshot of `rows` rows in two parts (so size_bytes is a sum), manifest last."""
    table = TableId.parse(table) if isinstance(table, str) else table
    snapshot_id = snapshot_id or f"snap-{next(_ids):04d}"
    values = [{"id": i, "name": f"n{i}"} for i in range(rows)]
    checksum, parts = Checksum(), []
    for index, chunk in enumerate((values[:2], values[2:])):
        part, data = encode_part(index, chunk)
        checksum.update(data)
        await store.write_part(table, snapshot_id, part.name, data)
        parts.append(part)
    manifest = SnapshotManifest(snapshot_id, table, COLUMNS, ("id",), rows, position, 40 + rows, rows, created_at,
                                tuple(parts), checksum.value, source_id="pg", user_meta=dict(user_meta or {}))
    await store.write_manifest(manifest)
    return manifest


@contextlib.asynccontextmanager
async def fake_fanout(coordination: CoordinationStore, instance_id: str, store: SnapshotStore, *,
                      clock: list[float], fail: Mapping[str, str] | None = None) -> AsyncIterator[list[Any]]:
    """Answer SNAPSHOT commands for `fanout:<instance_id>` the way fan-out does: write a snapshot of every named
    table (rows = 3) and return the ids in `snapshots`, except tables in `fail` ({table: reason})."""
    received: list[Any] = []
    subscription = coordination.commands(f"fanout:{instance_id}", instance_id)

    async def serve() -> None:
        async for command in subscription:
            received.append(command)
            assert command.kind is CommandKind.SNAPSHOT
            taken, failed = {}, {}
            for name in command.args["tables"]:
                if fail and name in fail:
                    failed[name] = fail[name]
                    continue
                clock[0] += 1
                manifest = await write_snapshot(store, name, clock[0], user_meta=command.args.get("user_meta"))
                taken[name] = manifest.snapshot_id
            status = CommandStatus.FAILED if failed else CommandStatus.SUCCEEDED
            await coordination.complete_command(command, CommandResult(
                command.command_id, status, "done", {"snapshots": taken, "failed": failed, "missing": []},
                executed_by=instance_id))

    task = asyncio.create_task(serve())
    try:
        yield received
    finally:
        await subscription.aclose()
        done, _ = await asyncio.wait({task}, timeout=5)
        if not done:
            task.cancel()
            raise AssertionError(f"the fake fan-out {instance_id} did not stop within 5s of closing")
        task.result()

"""Fake instances for OAM tests: heartbeats like ingest and fan-out send, and a command executor."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from laredo_kernel.changes import TableId
from laredo_core.coordination.ports import (
    Command,
    CommandResult,
    CommandStatus,
    CoordinationStore,
    InstanceStatus,
)

from laredo_oam.domain.catalog import Catalog, ConfiguredSource, ConfiguredTable, ConfiguredTarget

FANOUT = "replication-fanout"
QUERY = "indexed-memory"


def catalog(source: str = "pg", tables: tuple[str, ...] = ("public.users", "public.orders")) -> Catalog:
    return Catalog((ConfiguredSource(source, "postgresql", True, {"slot_mode": "stateful"}),),
                   tuple(ConfiguredTable(source, TableId.parse(t), (ConfiguredTarget(FANOUT, {"primary_key": "id"}),))
                         for t in tables))


def ingest_report(source: str = "pg", phase: str = "streaming", **extra: Any) -> dict[str, Any]:
    return {"source": source, "phase": phase, "leader": True, "confirmed_lsn": "0/16B3748",
            "received_lsn": "0/16B3800", "lag_bytes": 184, "lag_seconds": 0.25, "baseline_complete": True,
            **extra}


def fanout_report(tables: dict[str, dict[str, Any]], draining: bool = False) -> dict[str, Any]:
    entries = {name: {"ready": True, "baseline_complete": True, "rows": 10, **entry} for name, entry in tables.items()}
    return {"ready": all(e["ready"] for e in entries.values()), "draining": draining, "tables": entries}


async def beat(store: CoordinationStore, service: str, instance_id: str, status: dict[str, Any]) -> None:
    await store.heartbeat(InstanceStatus(service, instance_id, status), ttl=30)


Decide = Callable[[Command], tuple[CommandStatus, str]]


def succeed(command: Command) -> tuple[CommandStatus, str]:
    return CommandStatus.SUCCEEDED, f"{command.kind.value} done"


@contextlib.asynccontextmanager
async def executing(store: CoordinationStore, target: str, consumer: str, decide: Decide = succeed,
                    seen: list[Command] | None = None) -> AsyncIterator[list[Command]]:
    """Carry out commands for `target` while inside: record them in the yielded list, answer with `decide`."""
    received: list[Command] = [] if seen is None else seen

    subscription = store.commands(target, consumer)

    async def serve() -> None:
        async for command in subscription:
            received.append(command)
            status, message = decide(command)
            await store.complete_command(command, CommandResult(command.command_id, status, message,
                                                                {"kind": command.kind.value}, executed_by=consumer))

    task = asyncio.create_task(serve())
    try:
        yield received
    finally:
        # Closing ends the iteration after at most one blocking read; cancelling a blocked Redis read instead
        # was seen to leave the task hanging.
        await subscription.aclose()
        done, _ = await asyncio.wait({task}, timeout=5)
        if not done:
            task.cancel()
            raise AssertionError(f"the fake executor of {target} did not stop within 5s of closing")
        task.result()

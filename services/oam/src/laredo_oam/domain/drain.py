"""Which fan-out instances a drain addresses, and whether it would leave a table without a ready instance.

A drain tells one fan-out instance's Sync clients to move to another instance; it only helps them when another
instance is ready for their table. So a drain names its instance, and a drain that would take the last ready
instance of a table out of service is refused unless forced. A request without an instance means every
instance serving the table (or every table): it is refused the same way whenever a table has a ready
instance, and is the way to drain everything on purpose (with force).

Readiness comes from the instances' heartbeats (`tables[<t>].ready`, `tables[<t>].draining`): a check made
at one moment, not a lock. Two drains sent at the same time may each see the other's instance still ready.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from laredo_kernel.changes import TableId
from laredo_core.coordination.ports import InstanceStatus

from laredo_oam.domain.errors import NotFound, PreconditionFailed
from laredo_oam.domain.states import mapping_in

#: instance id -> the tables it reports -> its report of the table.
Served = Mapping[str, Mapping[str, Mapping[str, Any]]]


@dataclass(frozen=True, slots=True)
class DrainPlan:
    """The instances to drain, and the tables the drain leaves without a ready instance (forced only)."""

    instances: tuple[str, ...]
    stranded: tuple[str, ...] = ()


def plan_drain(fanouts: Sequence[InstanceStatus], table: TableId | None, instance_id: str, *,
               force: bool) -> DrainPlan:
    """The instances a drain addresses: `instance_id`, or every one serving `table` (every table: None).

    Raises NotFound for an instance that is not running or does not serve the table, PreconditionFailed when
    a table would be left without a ready instance and `force` is false.
    """
    served: Served = {i.instance_id: _tables(i.status) for i in fanouts}
    running = ", ".join(sorted(served)) or "none"
    if instance_id:
        if instance_id not in served:
            raise NotFound(f"fan-out instance {instance_id!r} is not running (no heartbeat in the coordination "
                           f"store); running fan-out instances: {running}")
        if table is not None and str(table) not in served[instance_id]:
            raise NotFound(f"fan-out instance {instance_id!r} does not serve {table}; instances serving it: "
                           f"{', '.join(_serving(served, str(table))) or 'none'}")
        chosen: tuple[str, ...] = (instance_id,)
    else:
        chosen = tuple(sorted(i for i, tables in served.items() if table is None or str(table) in tables))
    affected = [str(table)] if table is not None else sorted({t for i in chosen for t in served[i]})
    stranded = tuple(t for t in affected if (ready := _ready_instances(served, t)) and set(ready) <= set(chosen))
    if stranded and not force:
        raise PreconditionFailed(_refusal(chosen, stranded, served, named=bool(instance_id)))
    return DrainPlan(chosen, stranded)


def _refusal(chosen: tuple[str, ...], stranded: tuple[str, ...], served: Served, *,
             named: bool) -> str:
    tables = ", ".join(f"{t} (ready: {', '.join(_ready_instances(served, t))})" for t in stranded)
    if named:
        return (f"draining fan-out instance {chosen[0]} would leave no ready fan-out instance for {tables}: its "
                "clients would have nowhere to go. Start another instance serving the table and wait until it is "
                "ready, or repeat with force=true (laredo drain --force) to drain it anyway")
    return (f"a drain without an instance drains every fan-out instance serving the table(s) "
            f"({', '.join(chosen)}), which would leave no ready fan-out instance for {tables}. Name the instance "
            "to drain with instance_id (laredo drain --instance ID), or repeat with force=true (laredo drain "
            "--force) to drain all of them")


def _tables(status: Mapping[str, Any]) -> Mapping[str, Mapping[str, Any]]:
    return {str(name): entry for name, entry in mapping_in(status, "tables").items() if isinstance(entry, Mapping)}


def _serving(served: Served, table: str) -> list[str]:
    return sorted(i for i, tables in served.items() if table in tables)


def _ready_instances(served: Served, table: str) -> list[str]:
    """The instances whose Sync streams for `table` a client can move to: ready and not draining."""
    return [i for i in _serving(served, table)
            if served[i][table].get("ready") is True and not served[i][table].get("draining")]

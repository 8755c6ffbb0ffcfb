"""Snapshot management: find, list, delete and prune the snapshots in the configured stores; create through fan-out.

Each table's store is the one its replication-fanout target's `snapshot` section names (several tables may
share one). A store is searched for the tables configured with it and for every other table it holds (a
table removed from the configuration keeps its snapshots until they are deleted). Snapshot ids are unique
per writer, so `find` returns the first snapshot with the id. Store failures become SnapshotStoreFailed,
naming the store and the step.

CreateSnapshot: fan-out writes the snapshot (it holds the table); OAM only picks the instance: among the live ones
that report the table, ready and not draining ones first, then by instance id. Tables served by one instance go
in one command. Several tables: `snapshot_ids` follow the request order, and the response joins them with ",".
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from laredo_kernel.changes import TableId
from laredo_core.coordination.ports import CommandKind, CommandResult, InstanceStatus
from laredo_core.snapshots.errors import SnapshotCorrupt, SnapshotStoreUnavailable
from laredo_core.snapshots.format import SnapshotManifest
from laredo_core.snapshots.store import SnapshotStore

from laredo_oam.application.commands import command_answers
from laredo_oam.application.reports import Reports, reported_tables
from laredo_oam.domain.catalog import Catalog
from laredo_oam.domain.errors import InvalidRequest, NotFound, PreconditionFailed, SnapshotStoreFailed
from laredo_oam.domain.states import mapping_in
from laredo_oam.domain.views import SnapshotSummaryView
from laredo_oam.ports import CoordinationStore

FANOUT_TARGET = "replication-fanout"
HOW_TO_CONFIGURE = ("add snapshot { store = local, store_config { path = ... } } (or store = s3 with "
                    "store_config { bucket, endpoint }) to the table's replication-fanout target; see "
                    "docs/configuration.md")
ID_SEPARATOR = ","
T = TypeVar("T")
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Created:
    """accepted: every table got a snapshot; snapshot_ids: those written, in request order."""

    accepted: bool
    snapshot_ids: tuple[str, ...]
    message: str

    @property
    def snapshot_id(self) -> str:
        return ID_SEPARATOR.join(self.snapshot_ids)


@dataclass(frozen=True, slots=True)
class SnapshotPlace:
    """A configured snapshot store and how people name it."""

    store: SnapshotStore
    store_type: str  # local | s3 | memory
    location: str  # the directory, or s3://bucket/prefix

    def __str__(self) -> str:
        return f"{self.store_type} snapshot store {self.location}"


@dataclass(frozen=True, slots=True)
class StoredSnapshot:
    """One snapshot, where it is kept, and the target type that wrote it."""

    table: TableId
    manifest: SnapshotManifest
    place: SnapshotPlace
    target_type: str = FANOUT_TARGET

    @property
    def snapshot_id(self) -> str:
        return self.manifest.snapshot_id


def parse_table(text: str, field: str = "table") -> TableId:
    """A request's "schema.table" (both parts required); InvalidRequest otherwise."""
    try:
        return TableId.parse(text.strip())
    except ValueError:
        raise InvalidRequest(f"{field} {text!r} is malformed: expected 'schema.table', e.g. 'public.users'") from None


class Snapshots:
    """The snapshot RPCs' use cases. `places`: the store of every table configured with one."""

    def __init__(self, places: Mapping[TableId, SnapshotPlace], catalog: Catalog, coordination: CoordinationStore,
                 *, command_timeout: float = 10.0) -> None:
        self._places = dict(places)
        self._catalog = catalog
        self._coordination = coordination
        self.command_timeout = command_timeout

    async def create(self, tables: Sequence[str], user_meta: Mapping[str, Any]) -> Created:
        """CreateSnapshot: the named tables (none: every table with a store) by a live fan-out instance each."""
        self._require_stores()
        return await create_snapshots(self._coordination, self._catalog, tuple(self._places),
                                      [parse_table(t, "tables entry") for t in tables], user_meta,
                                      command_timeout=self.command_timeout)

    async def summary(self) -> SnapshotSummaryView:
        """GetStatus's snapshot_status: the stores configured and what they hold. A store that fails leaves the
        counts out (logged): the system's status does not depend on a snapshot store answering."""
        if not self._places:
            return SnapshotSummaryView(False)
        store_types = ",".join(sorted({p.store_type for p in self._places.values()}))
        try:
            found = await self._snapshots()
        except SnapshotStoreFailed as exc:
            log.warning("status shows no snapshot counts: %s", exc)
            found = []
        if not found:
            return SnapshotSummaryView(True, store_types)
        latest = found[0].manifest
        return SnapshotSummaryView(True, store_types, latest.snapshot_id, round(latest.created_at * 1000),
                                   len(found))

    async def find(self, snapshot_id: str) -> StoredSnapshot:
        """The snapshot with this id, in whichever store and table holds it; NotFound when none does."""
        if not snapshot_id.strip():
            raise InvalidRequest("snapshot_id is required: ListSnapshots shows the ids of the retained snapshots")
        self._require_stores()
        for place, table in await self._holdings():
            manifest = await _io(place, f"reading snapshot {snapshot_id!r} of {table}",
                                 place.store.read_manifest(table, snapshot_id))
            if manifest is not None:
                return StoredSnapshot(table, manifest, place)
        stores = ", ".join(sorted({str(p) for p in self._places.values()}))
        raise NotFound(f"snapshot {snapshot_id!r} not found in {stores}; ListSnapshots shows the retained ones")

    async def list(self, table: str = "", limit: int = 0) -> list[StoredSnapshot]:
        """Every snapshot (of one table when named), newest first; at most `limit` (0: all)."""
        if limit < 0:
            raise InvalidRequest(f"limit must be 0 (no limit) or positive, got {limit}")
        return (await self._snapshots(table))[:limit or None]

    async def delete(self, snapshot_id: str) -> bool:
        await _delete(await self.find(snapshot_id))
        return True

    async def prune(self, keep: int, table: str = "") -> int:
        """Delete all but the newest `keep` snapshots of each table (or of one); the number deleted."""
        if keep <= 0:
            raise InvalidRequest(f"keep must be at least 1 (the newest snapshots kept per table), got {keep}")
        by_table: dict[TableId, list[StoredSnapshot]] = {}
        for snapshot in await self._snapshots(table):
            by_table.setdefault(snapshot.table, []).append(snapshot)  # newest first within each table
        old = [snapshot for snapshots in by_table.values() for snapshot in snapshots[keep:]]
        for snapshot in old:
            await _delete(snapshot)
        return len(old)

    async def _snapshots(self, table: str = "") -> list[StoredSnapshot]:
        """Every snapshot (of the request's table, when it names one), newest first."""
        wanted = parse_table(table) if table.strip() else None
        self._require_stores()
        holdings = await self._holdings()
        if wanted is not None:
            holdings = [(p, t) for p, t in holdings if t == wanted]
            if not holdings:
                self._unknown_table(wanted)
        found = [StoredSnapshot(held, manifest, place) for place, held in holdings for manifest in
                 await _io(place, f"listing the snapshots of {held}", place.store.list_snapshots(held))]
        return sorted(found, key=lambda s: (s.manifest.created_at, s.snapshot_id), reverse=True)

    async def _holdings(self) -> list[tuple[SnapshotPlace, TableId]]:
        """Every (store, table) to look in: the tables configured with each store, then any other it holds."""
        pairs = {(place, table): None for table, place in self._places.items()}
        for place in dict.fromkeys(self._places.values()):
            for table in await _io(place, "listing its tables", place.store.list_tables()):
                pairs.setdefault((place, table), None)
        return list(pairs)

    def _require_stores(self) -> None:
        if not self._places:
            raise PreconditionFailed(f"no snapshot store is configured for any table: {HOW_TO_CONFIGURE}")

    def _unknown_table(self, table: TableId) -> None:
        if self._catalog.tables_named(table):
            raise PreconditionFailed(f"table {table} has no snapshot store and no store holds snapshots of it: "
                                     f"{HOW_TO_CONFIGURE}")
        raise NotFound(f"table {table} is not configured and no snapshot store holds snapshots of it; "
                       f"tables with snapshot stores: {', '.join(sorted(map(str, self._places))) or 'none'}")


async def _delete(snapshot: StoredSnapshot) -> None:
    await _io(snapshot.place, f"deleting snapshot {snapshot.snapshot_id!r} of {snapshot.table}",
              snapshot.place.store.delete_snapshot(snapshot.table, snapshot.snapshot_id))


async def _io(place: SnapshotPlace, doing: str, call: Awaitable[T]) -> T:
    try:
        return await call
    except SnapshotStoreUnavailable as exc:
        raise SnapshotStoreFailed(f"{place} failed while {doing}: {exc}; check that the store is reachable "
                                  "and writable") from exc
    except SnapshotCorrupt as exc:
        raise SnapshotStoreFailed(f"{place} holds a damaged snapshot ({doing}): {exc}") from exc


async def create_snapshots(coordination: CoordinationStore, catalog: Catalog, stored: Sequence[TableId],
                           tables: Sequence[TableId], user_meta: Mapping[str, Any], *,
                           command_timeout: float) -> Created:
    """Snapshots of `tables` (none: every table of `stored`, the tables with a snapshot store)."""
    tables = list(dict.fromkeys(tables)) or list(stored)
    for table in tables:
        if table not in stored:
            catalog.require_table(table)  # NotFound naming the configured tables
            raise PreconditionFailed(f"table {table} has no snapshot store: add a snapshot {{ ... }} section to its "
                                     "replication-fanout target (see docs/configuration.md)")
    by_instance = _assign(tables, (await Reports.read(coordination)).of("fanout"))
    commands = [(f"fanout:{instance}", CommandKind.SNAPSHOT, {"tables": [str(t) for t in mine],
                                                              "user_meta": dict(user_meta)})
                for instance, mine in by_instance.items()]
    answers = await command_answers(coordination, commands, command_timeout,
                                    "the snapshot may still be written (ListSnapshots shows it then)")
    return _created(tables, by_instance, {target.removeprefix("fanout:"): answer for target, answer in answers})


def _assign(tables: list[TableId], instances: Sequence[InstanceStatus]) -> dict[str, list[TableId]]:
    """instance id -> the tables it is asked to snapshot; PreconditionFailed when a table has no instance."""
    by_instance: dict[str, list[TableId]] = {}
    for table in tables:
        entries = [(i, reported_tables(i).get(str(table))) for i in instances]
        serving = [(i, entry) for i, entry in entries if isinstance(entry, Mapping)]
        if not serving:
            raise PreconditionFailed(f"no live fan-out instance serves table {table}, so nobody can take its "
                                     "snapshot; start laredo-fanout with this table (and a redis section) and "
                                     "retry once it reports in")
        best, _ = min(serving, key=lambda s: (not s[1].get("ready", False), bool(s[0].status.get("draining")),
                                              s[0].instance_id))
        by_instance.setdefault(best.instance_id, []).append(table)
    return by_instance


def _created(tables: list[TableId], by_instance: dict[str, list[TableId]],
             results: dict[str, CommandResult]) -> Created:
    ids: list[str] = []
    lines: list[str] = []
    for table in tables:
        instance = next(i for i, mine in by_instance.items() if table in mine)
        result = results[instance]
        snapshot_id = mapping_in(result.details, "snapshots").get(str(table))
        if snapshot_id:
            ids.append(str(snapshot_id))
            lines.append(f"{table}: snapshot {snapshot_id} written by {instance}")
            continue
        why = mapping_in(result.details, "failed").get(str(table)) or result.message or result.status.value
        lines.append(f"{table}: no snapshot from {instance} ({result.status.value}: {why})")
    return Created(len(ids) == len(tables), tuple(ids), "; ".join(lines))

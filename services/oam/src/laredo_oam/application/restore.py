"""RestoreSnapshot: rebuild a table on every fan-out and query instance that serves it, from a snapshot.

Each instance rebuilds the table from the snapshot plus the stream tail up to what it has applied, then
installs the result as a re-baseline of its live state (laredo_core.rebuild.runner). The answer comes once
every instance has started; GetReplayStatus follows the restore by the id the message names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from laredo_core.rebuild.records import RebuildKind

from laredo_oam.application.replay import REBUILD_SERVICES, RebuildLauncher
from laredo_oam.application.snapshots import HOW_TO_CONFIGURE, Snapshots
from laredo_oam.domain.errors import InvalidRequest, PreconditionFailed


@dataclass(frozen=True, slots=True)
class Restored:
    accepted: bool
    message: str
    rebuild_id: str = ""
    user_meta: Mapping[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


class Restores:
    def __init__(self, snapshots: Snapshots | None, launcher: RebuildLauncher) -> None:
        self._snapshots = snapshots
        self._launcher = launcher

    async def restore(self, snapshot_id: str, *, confirm: bool, skip_meta_check: bool) -> Restored:
        if not snapshot_id.strip():
            raise InvalidRequest("snapshot_id is required: ListSnapshots shows the retained snapshots")
        if "/" in snapshot_id or snapshot_id.startswith("."):
            raise InvalidRequest(f"snapshot_id {snapshot_id!r} is malformed: ids contain no '/' and do not start "
                                 "with '.'; ListSnapshots shows the retained ones")
        if not confirm:
            raise PreconditionFailed(f"restoring snapshot {snapshot_id!r} replaces the rows of its table on every "
                                     "fan-out and query instance (clients receive the differences as changes); "
                                     "repeat the request with confirm=true to do it")
        if self._snapshots is None:
            raise PreconditionFailed(f"no snapshot store is configured: {HOW_TO_CONFIGURE}")
        snapshot = await self._snapshots.find(snapshot_id)
        started = await self._launcher.start(RebuildKind.RESTORE, snapshot, REBUILD_SERVICES,
                                             skip_meta_check=skip_meta_check)
        return Restored(started.accepted, started.message, started.rebuild_id, snapshot.manifest.user_meta,
                        started.warnings)

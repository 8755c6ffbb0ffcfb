"""While streaming: read the slot's WAL status and the server's WAL position, for lag and for slot loss.

A slot that disappears or is invalidated (wal_status = lost, e.g. max_slot_wal_keep_size exceeded) ends
the session with SlotLost; the next start sees it and re-baselines with RESYNC_REQUIRED. An
'unreserved' slot is about to be lost: that is logged once as a warning.

Inactive slots of the server keep WAL on the source's disk without bound: each one retaining more than
`inactive_slot_wal_warning` bytes is reported in the status and logged once (README, "Slots hold WAL").
"""

from __future__ import annotations

import asyncio
import logging

from laredo_kernel.position import format_lsn

from laredo_ingest.application.options import IngestOptions
from laredo_ingest.application.status import IngestStatus
from laredo_ingest.domain.errors import SlotLost
from laredo_ingest.domain.slot_retention import retention_warning, slots_over_threshold
from laredo_ingest.ports import SourceDatabase

log = logging.getLogger(__name__)


class SlotMonitor:
    def __init__(self, db: SourceDatabase, status: IngestStatus, options: IngestOptions) -> None:
        self._db = db
        self._status = status
        self._slot_name = options.slot_name
        self._interval = options.slot_check_interval
        self._inactive_wal_warning = options.inactive_slot_wal_warning
        self._warned = False

    async def run(self) -> None:
        while True:
            await self.check()
            await asyncio.sleep(self._interval)

    async def check(self) -> None:
        await self._check_inactive_slots()
        status = self._status
        status.observe_server_wal(await self._db.current_wal_lsn())
        slot = await self._db.slot(self._slot_name)
        if slot is None:
            status.slot_wal_status = "missing"
            raise SlotLost(f"replication slot {self._slot_name} disappeared while streaming (dropped?)")
        status.slot_wal_status, status.slot_safe_wal_size = slot.wal_status, slot.safe_wal_size
        if slot.wal_status == "lost":
            raise SlotLost(f"replication slot {self._slot_name} was invalidated (wal_status lost, "
                           "max_slot_wal_keep_size exceeded?)")
        if slot.wal_status == "unreserved" and not self._warned:
            self._warned = True
            log.warning("replication slot %s is about to be invalidated (wal_status unreserved, %s bytes of WAL "
                        "left before max_slot_wal_keep_size; confirmed %s, server at %s): ingest is falling "
                        "behind", self._slot_name, slot.safe_wal_size, format_lsn(slot.confirmed_flush_lsn),
                        format_lsn(status.server_lsn))

    async def _check_inactive_slots(self) -> None:
        threshold, status = self._inactive_wal_warning, self._status
        if threshold <= 0:
            return
        over = slots_over_threshold(await self._db.inactive_slots(), threshold)
        for name in sorted(over.keys() - status.inactive_slots.keys()):
            log.warning("%s", retention_warning(name, over[name], threshold))
        changed = over.keys() != status.inactive_slots.keys()
        status.inactive_slots = over
        if changed:
            status.changed()

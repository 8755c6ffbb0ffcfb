"""While streaming: read the slot's WAL status and the server's WAL position, for lag and for slot loss.

A slot that disappears or is invalidated (wal_status = lost, e.g. max_slot_wal_keep_size exceeded) ends
the session with SlotLost; the next start sees it and re-baselines with RESYNC_REQUIRED. An
'unreserved' slot is about to be lost: that is logged once as a warning.
"""

from __future__ import annotations

import asyncio
import logging

from laredo_core.position import format_lsn

from laredo_ingest.application.status import IngestStatus
from laredo_ingest.domain.errors import SlotLost
from laredo_ingest.ports import SourceDatabase

log = logging.getLogger(__name__)


class SlotMonitor:
    def __init__(self, db: SourceDatabase, slot_name: str, status: IngestStatus, interval: float) -> None:
        self._db = db
        self._slot_name = slot_name
        self._status = status
        self._interval = interval
        self._warned = False

    async def run(self) -> None:
        while True:
            await self.check()
            await asyncio.sleep(self._interval)

    async def check(self) -> None:
        status = self._status
        status.server_lsn = await self._db.current_wal_lsn()
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

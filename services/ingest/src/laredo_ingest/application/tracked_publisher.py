"""Publishing with confirmation bookkeeping: the ack tracker learns of every message, the first failure sticks."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from laredo_ingest.application.status import IngestStatus
from laredo_ingest.domain.ack_tracker import AckTracker
from laredo_ingest.domain.batches import OutboundBatch
from laredo_ingest.domain.errors import IngestError, PublishFailed
from laredo_ingest.ports import ChangePublisher


class TrackedPublisher:
    """One per replication session or baseline; after a failure every later publish raises it."""

    def __init__(self, publisher: ChangePublisher, start_lsn: int, status: IngestStatus) -> None:
        self._publisher = publisher
        self.tracker = AckTracker(start_lsn)
        self._status = status
        self.failure: IngestError | None = None
        self.failed = asyncio.Event()
        self.confirm_advanced = asyncio.Event()
        self._settled = asyncio.Event()  # set when nothing is pending or something failed
        self._settled.set()

    @property
    def confirmed_lsn(self) -> int:
        return self.tracker.confirmed_lsn

    async def publish(self, batch: OutboundBatch, trace_headers: Mapping[str, str] | None = None) -> None:
        if self.failure is not None:
            raise self.failure
        seq = self.tracker.register(batch.end_lsn)
        self._settled.clear()
        await self._publisher.publish(batch, lambda error: self._on_ack(seq, error), trace_headers)

    def mark(self, lsn: int) -> None:
        """A position with nothing to publish (empty transaction, idle keepalive)."""
        if self.tracker.mark(lsn):
            self.confirm_advanced.set()

    async def drain(self, timeout: float) -> None:
        """Wait until every published message is acknowledged; raise the failure if one failed."""
        try:
            async with asyncio.timeout(timeout):
                while not self.tracker.drained and self.failure is None:
                    await self._settled.wait()
        except TimeoutError:
            raise PublishFailed(
                f"{self.tracker.pending} message(s) still unacknowledged by JetStream after {timeout:g}s; "
                "check the NATS server and the stream's limits") from None
        if self.failure is not None:
            raise self.failure

    def _on_ack(self, seq: int, error: IngestError | None) -> None:
        if error is not None:
            if self.failure is None:
                self.failure = error
                self.failed.set()
            self._settled.set()
            return
        self._status.published_messages += 1
        if self.tracker.ack(seq):
            self.confirm_advanced.set()
        if self.tracker.drained:
            self._settled.set()

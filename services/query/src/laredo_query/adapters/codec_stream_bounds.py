"""The StreamBounds port over a laredo_core StreamBoundsReader (JetStream or memory), with the table's columns
decoded from its subject's last message by the stream codec, as the feed decodes them."""

from __future__ import annotations

import logging

from laredo_kernel.changes import TableId
from laredo_kernel.errors import ProtocolError
from laredo_core.stream.bounds import StreamBoundsReader, StreamBoundsUnavailable
from laredo_core.stream.codec import decode_batch

from laredo_query.domain.snapshot_choice import StreamState, StreamStateUnavailable

log = logging.getLogger(__name__)


class CodecStreamBounds:
    """The StreamBounds port (laredo_query.ports) on `reader` (NatsStreamBoundsReader in production,
    MemoryStreamBoundsReader in tests, whose faults then apply)."""

    def __init__(self, reader: StreamBoundsReader) -> None:
        self.reader = reader

    async def state(self, source_id: str, table: TableId) -> StreamState:
        try:
            bounds = await self.reader.bounds(source_id, table)
        except StreamBoundsUnavailable as exc:
            raise StreamStateUnavailable(str(exc), retryable=exc.retryable) from exc
        stream, first, last, sequence = (bounds.stream, bounds.first_sequence, bounds.last_sequence,
                                         bounds.subject_last_sequence)
        if not sequence:
            return StreamState(stream, first, last, 0)
        try:
            batch = decode_batch(bounds.subject_last_message, json_values=True)
        except ProtocolError as exc:
            log.warning("the last message of %s in %s (stream sequence %d) does not decode: %s", table, stream,
                        sequence, exc)
            return StreamState(stream, first, last, sequence)
        return StreamState(stream, first, last, sequence, batch.columns, batch.key_columns)

    async def aclose(self) -> None:
        await self.reader.aclose()

"""How large one stream message of a table may be: `stream.max_batch_bytes` and the transport's max_payload.

NATS refuses a message whose headers and payload exceed the server's max_payload (1 MiB by default). A
refused message ends the session, and the same WAL is refused again after every restart: ingest would
crash-loop on one wide row. So every message is sized before it is built: a change counts its tuples plus
CHANGE_OVERHEAD_BYTES, the rest of the message (headers, table and column descriptions, fixed fields, the
framing of each change) is estimated from above, and
- a message holds at most max_batch_bytes of changes, and never more than max_payload allows;
- one change larger than max_batch_bytes that max_payload allows goes alone in its message;
- one change that does not fit max_payload even alone cannot be published at all: it is not put on the table's subject
  but becomes a dead letter (`oversized_dead_letter`) that names it, its size and the limit, and holds its
  key and small values only (the whole row would not fit either). The table's replica lacks that change
  until the limit is raised and the table reloaded, which the letter says.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from laredo_kernel.changes import BatchKind
from laredo_kernel.position import Position
from laredo_core.stream.naming import control_msg_id, deadletter_subject
from laredo_kernel.tuples import UNCHANGED, RawValue, decode_tuple_exact, encode_tuple

from laredo_ingest.domain.batches import ChangeRecord, OutboundBatch
from laredo_ingest.domain.schema import TableSchema

#: Headers (message id, kind, LSNs, table, trace context) and the fixed fields of a ChangeBatch, from above.
ENVELOPE_BYTES = 1024
#: Protobuf framing of one column description beyond its name and type name, from above.
COLUMN_OVERHEAD_BYTES = 48
#: Protobuf framing of one change beyond what CHANGE_OVERHEAD_BYTES counts (tags, lengths, a 10-byte ordinal).
CHANGE_FRAMING_SLACK = 24
#: What a dead letter of an oversized change keeps: key values up to this size, other values up to the next.
KEPT_KEY_BYTES = 4096
KEPT_VALUE_BYTES = 256
UNLIMITED = sys.maxsize


@dataclass(frozen=True, slots=True)
class TableLimits:
    """Byte limits of one message of one table; sizes as ChangeRecord.size counts them."""

    chunk_bytes: int  # stream.max_batch_bytes: the changes of one message together
    room: int  # what max_payload leaves for the changes, their framing included (UNLIMITED: no limit known)

    def oversized(self, size: int) -> bool:
        """The change cannot be published, not even alone."""
        return size + CHANGE_FRAMING_SLACK > self.room

    def overflows(self, count: int, total: int, size: int) -> bool:
        """A message holding `count` changes of `total` bytes has no room for one more of `size` bytes."""
        total += size
        return total > self.chunk_bytes or total + CHANGE_FRAMING_SLACK * (count + 1) > self.room


@dataclass(frozen=True, slots=True)
class MessageLimits:
    """stream.max_batch_bytes and the NATS server's max_payload (0: not known, only max_batch_bytes applies)."""

    max_batch_bytes: int
    max_payload: int = 0

    def for_table(self, schema: TableSchema) -> TableLimits:
        if self.max_payload <= 0:
            return TableLimits(self.max_batch_bytes, UNLIMITED)
        return TableLimits(self.max_batch_bytes, max(self.max_payload - envelope_bytes(schema), 0))


def envelope_bytes(schema: TableSchema) -> int:
    """Everything of one message of `schema` but its changes, from above."""
    table = len(schema.table.schema) + len(schema.table.name)
    return (ENVELOPE_BYTES + 3 * table
            + sum(len(c.name) + len(c.type_name) + COLUMN_OVERHEAD_BYTES for c in schema.columns))


@dataclass(frozen=True, slots=True)
class OversizedMessage:
    """Where an oversized change was found: enough to name it and to build its dead letter."""

    source_id: str
    subject_prefix: str
    kind: BatchKind
    commit_lsn: int
    xid: int = 0
    commit_time_unix_us: int = 0
    baseline_id: str = ""


def oversized_dead_letter(where: OversizedMessage, schema: TableSchema, change: ChangeRecord,
                          limits: MessageLimits) -> OutboundBatch:
    """The message that stands for a change too large to publish (see the module docstring)."""
    table = schema.table
    position = Position(where.commit_lsn, change.ordinal)
    reason = (f"the {change.action.value} of {table} at position {position} is {change.size} bytes, more than the "
              f"{limits.max_payload} bytes the NATS server accepts in one message (max_payload): it is not "
              "published and the table's replicas lack it. Raise max_payload in the NATS server configuration "
              "(at most 64MB; clients reconnect), then reload the table (ReloadTable) to replicate the row. "
              "This letter holds the row's key and small values only")
    shrunk = ChangeRecord(change.action, change.ordinal, _keep_small(change.old_tuple, schema),
                          _keep_small(change.new_tuple, schema), change.old_is_key_only)
    return OutboundBatch(
        subject=deadletter_subject(where.subject_prefix, where.source_id, table),
        msg_id=control_msg_id(where.source_id, "oversized", where.commit_lsn, table,
                              f"{where.baseline_id}:{change.ordinal}" if where.baseline_id else str(change.ordinal)),
        source_id=where.source_id, kind=where.kind, schema=schema, commit_lsn=where.commit_lsn, xid=where.xid,
        commit_time_unix_us=where.commit_time_unix_us, last_chunk=True, changes=[shrunk],
        baseline_id=where.baseline_id, dead_letter_reason=reason)


def _keep_small(data: bytes, schema: TableSchema) -> bytes:
    """The tuple with large values replaced by UNCHANGED: consumers and replays refuse to insert such a row."""
    if not data:
        return data
    values = decode_tuple_exact(data)
    columns = schema.columns

    def keep(i: int, value: RawValue) -> RawValue:
        if not isinstance(value, bytes):
            return value
        is_key = i < len(columns) and columns[i].is_identity_key
        return value if len(value) <= (KEPT_KEY_BYTES if is_key else KEPT_VALUE_BYTES) else UNCHANGED

    return encode_tuple([keep(i, v) for i, v in enumerate(values)])

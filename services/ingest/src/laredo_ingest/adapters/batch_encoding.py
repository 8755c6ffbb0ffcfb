"""OutboundBatch -> laredo.stream.v1.ChangeBatch bytes.

Each message carries the table and its columns; those bytes are serialized once per (source, schema) and
concatenated with the rest of the message: protobuf parsers merge concatenated messages field by field.
"""

from __future__ import annotations

from laredo.stream.v1 import change_stream_pb2 as pb
from laredo_core.stream.codec import ACTION_TO_PROTO, KIND_TO_PROTO, columns_to_proto

from laredo_ingest.domain.batches import OutboundBatch
from laredo_ingest.domain.schema import ReplicaIdentity, TableSchema

_IDENTITY = {r: pb.ReplicaIdentity.Value(f"REPLICA_IDENTITY_{r.name}") for r in ReplicaIdentity}


_TABLE_PARTS: dict[tuple[str, int], tuple[TableSchema, bytes]] = {}  # (source, id(schema)) -> (schema, bytes)
_MAX_CACHED = 4096


def _table_part(source_id: str, schema: TableSchema) -> bytes:
    """Cached by schema identity (hashing a schema costs more than encoding it twice); the entry keeps the
    schema alive, so its id cannot be reused while cached."""
    key = (source_id, id(schema))
    cached = _TABLE_PARTS.get(key)
    if cached is not None:
        return cached[1]
    if len(_TABLE_PARTS) >= _MAX_CACHED:
        _TABLE_PARTS.clear()
    part = pb.ChangeBatch(
        source_id=source_id,
        table=pb.TableRef(schema=schema.table.schema, name=schema.table.name, relation_id=schema.relation_id),
        columns=columns_to_proto(schema.columns),
        replica_identity=_IDENTITY[schema.replica_identity],
    ).SerializeToString()
    _TABLE_PARTS[key] = (schema, part)
    return part


def encode_batch(batch: OutboundBatch, epoch: int = 0) -> bytes:
    """`epoch`: the source's WAL epoch of the message's positions (0 is not written)."""
    message = pb.ChangeBatch(
        epoch=epoch, kind=KIND_TO_PROTO[batch.kind], commit_lsn=batch.commit_lsn, end_lsn=batch.end_lsn, xid=batch.xid,
        commit_time_unix_us=batch.commit_time_unix_us, chunk=batch.chunk, last_chunk=batch.last_chunk,
        baseline_id=batch.baseline_id, baseline_row_count=batch.baseline_row_count, reason=batch.reason,
    )
    if batch.old_columns:
        message.old_columns.extend(columns_to_proto(batch.old_columns))
    add = message.changes.add
    for change in batch.changes:
        add(action=ACTION_TO_PROTO[change.action], ordinal=change.ordinal, old_tuple=change.old_tuple,
            new_tuple=change.new_tuple, old_is_key_only=change.old_is_key_only)
    return _table_part(batch.source_id, batch.schema) + message.SerializeToString()

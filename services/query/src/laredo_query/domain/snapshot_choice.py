"""Which stored snapshot a starting query table may load: pure checks against where the stream stands now."""

from __future__ import annotations

from dataclasses import dataclass

from laredo_kernel.changes import ColumnInfo, TableId
from laredo_kernel.position import Position, PositionError
from laredo_core.rebuild.meta import column_differences
from laredo_core.snapshots.format import SnapshotManifest

from laredo_query.domain.errors import QueryError


@dataclass(frozen=True, slots=True)
class StreamState:
    """Where the change stream stands for one table when the service starts (the StreamBounds port).
    first_sequence: the oldest message the stream still holds (any value up to last_sequence + 1 when it holds
    none); last_sequence: its newest message (0: none yet); table_last_sequence: the newest message of the table's
    subject (0: none); columns / key_columns: what that message carries, the table's current columns (empty when
    there is no such message or it does not decode)."""

    stream: str
    first_sequence: int
    last_sequence: int
    table_last_sequence: int
    columns: tuple[ColumnInfo, ...] = ()
    key_columns: tuple[str, ...] = ()


class StreamStateUnavailable(QueryError):
    """Where the stream stands cannot be read: retryable when the server cannot be reached, not retryable when the
    stream does not exist (a snapshot's stream sequence then means nothing)."""


def unusable_reason(manifest: SnapshotManifest, table: TableId, stream: StreamState) -> str:
    """Why the snapshot must not be loaded into `table` and continued with the stream after its stream_sequence
    ("" when it may). Checks what the manifest and the stream tell; its parts are verified while loading."""
    if manifest.table != table:
        return f"its manifest names table {manifest.table}"
    try:
        Position.parse(manifest.source_position)
    except PositionError as exc:
        return f"its source position {manifest.source_position!r} is not a position ({exc})"
    sequence = manifest.stream_sequence
    if stream.last_sequence < sequence:
        return (f"stream {stream.stream} ends at sequence {stream.last_sequence}, before the snapshot's stream "
                f"sequence {sequence}: the stream was created again after the snapshot was taken")
    if stream.first_sequence > sequence + 1:
        return (f"stream {stream.stream} starts at sequence {stream.first_sequence}: the messages right after the "
                f"snapshot's stream sequence {sequence} were removed (stream limits), so its tail has a gap")
    if not stream.columns:
        return (f"stream {stream.stream} holds no readable message of {table}, so the snapshot's columns cannot be "
                "checked against the table's current ones")
    differences = column_differences(manifest.columns, manifest.key_columns, stream.columns, stream.key_columns)
    if differences:
        return ("its columns are not the table's current ones in the stream (" + "; ".join(differences) + ")")
    return ""

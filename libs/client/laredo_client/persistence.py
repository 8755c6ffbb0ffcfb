"""The local snapshot file: the client's rows and cursor saved on stop, loaded on start for a fast restart.

Format (JSON, version 1): format, schema, table, filters, server_address, server_id, journal_epoch (optional:
absent in older files, whose last_seq is then never resumed from), last_seq, last_source_position, snapshot_id,
saved_at_unix_ms, key_columns, columns, rows.
Saving is atomic: a temporary file in the same directory is written, flushed to disk and renamed over the old
one, so a crash mid-save leaves the previous snapshot intact. A missing or unusable file means "start fresh"."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from laredo_client.client_replica import Cursor
from laredo_client.indexed_state import Row
from laredo_client.values import Column

log = logging.getLogger(__name__)
FORMAT_VERSION = 1


@dataclass(frozen=True)
class LocalSnapshot:
    schema: str
    table: str
    filters: list[dict[str, Any]]
    server_address: str
    cursor: Cursor
    key_columns: tuple[str, ...]
    columns: tuple[Column, ...]
    rows: list[Row]


class UnusableSnapshot(ValueError):
    """The file exists but cannot be used for this client."""


def save_local_snapshot(path: Path, snapshot: LocalSnapshot) -> None:
    """Write `snapshot` to `path` atomically (temporary file, fsync, rename), readable by the owner only."""
    document = {
        "format": FORMAT_VERSION, "schema": snapshot.schema, "table": snapshot.table, "filters": snapshot.filters,
        "server_address": snapshot.server_address, "server_id": snapshot.cursor.server_id,
        "journal_epoch": snapshot.cursor.journal_epoch,
        "last_seq": snapshot.cursor.sequence, "last_source_position": snapshot.cursor.source_position,
        "snapshot_id": snapshot.cursor.snapshot_id, "saved_at_unix_ms": int(time.time() * 1000),
        "key_columns": list(snapshot.key_columns), "columns": [c.to_json() for c in snapshot.columns],
        "rows": snapshot.rows,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            json.dump(document, out, separators=(",", ":"))
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    _sync_directory(path.parent)


def _sync_directory(directory: Path) -> None:
    """Make the rename itself durable (best effort: not every platform can open a directory)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def load_local_snapshot(path: Path, *, schema: str, table: str,
                        filters: Sequence[dict[str, Any]]) -> LocalSnapshot | None:
    """The snapshot at `path`, or None (logged, with the reason) when there is none or it cannot be used."""
    try:
        with path.open(encoding="utf-8") as source:
            document = json.load(source)
        snapshot = _parse(document)
        _check_matches(snapshot, schema, table, filters)
    except FileNotFoundError:
        log.info("no local snapshot at %s: starting fresh (full snapshot from the server)", path)
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("local snapshot %s is unusable (%s): ignoring it and starting fresh with a full snapshot",
                    path, exc)
        return None
    log.info("loaded local snapshot %s: %d rows at source position %s", path, len(snapshot.rows),
             snapshot.cursor.source_position or "(none)")
    return snapshot


def _parse(document: Any) -> LocalSnapshot:
    if not isinstance(document, dict):
        raise UnusableSnapshot("not a JSON object")
    if document.get("format") != FORMAT_VERSION:
        raise UnusableSnapshot(f"format {document.get('format')!r}, this client reads {FORMAT_VERSION}")
    rows = document["rows"]
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise UnusableSnapshot("'rows' must be a list of objects")
    cursor = Cursor(sequence=_typed(document, "last_seq", int), source_position=_typed(document,
                    "last_source_position", str), snapshot_id=_typed(document, "snapshot_id", str),
                    server_id=_typed(document, "server_id", str),
                    journal_epoch=_typed(document, "journal_epoch", str) if "journal_epoch" in document else "")
    columns = tuple(Column.from_json(c) for c in document["columns"])
    return LocalSnapshot(schema=_typed(document, "schema", str), table=_typed(document, "table", str),
                         filters=list(document["filters"]), server_address=_typed(document, "server_address", str),
                         cursor=cursor, key_columns=tuple(document["key_columns"]), columns=columns, rows=rows)


def _typed(document: dict[str, Any], name: str, kind: type) -> Any:
    value = document[name]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        raise UnusableSnapshot(f"{name!r} must be a {kind.__name__}, got {value!r}")
    return value


def _check_matches(snapshot: LocalSnapshot, schema: str, table: str, filters: Sequence[dict[str, Any]]) -> None:
    if (snapshot.schema, snapshot.table) != (schema, table):
        raise UnusableSnapshot(f"it holds {snapshot.schema}.{snapshot.table}, this client replicates "
                               f"{schema}.{table}")
    if snapshot.filters != list(filters):
        raise UnusableSnapshot(f"it was taken with filters {snapshot.filters}, this client uses {list(filters)}")
    cursor = snapshot.cursor
    if not cursor.source_position and not cursor.snapshot_id and not cursor.resumable_sequence:
        raise UnusableSnapshot("it records no source position, snapshot id or server sequence to resume from")

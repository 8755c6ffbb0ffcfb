"""The snapshot format (parts + manifest), shared with the Spark compaction job; pure functions only.

A snapshot of `schema.table` lives under `<schema>.<table>/<snapshot_id>/` (names escaped as NATS subject
tokens): parts `rows-00000.jsonl` (or `.parquet`, the manifest's `format`), then `manifest.json`, written last:
the snapshot exists only once it is there. Every field and value: docs/architecture.md, "Snapshot format".
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from laredo_kernel.changes import ColumnInfo, TableId
from laredo_core.snapshots.errors import SnapshotCorrupt
from laredo_core.stream.naming import escape_token

FORMAT = "jsonl"  # the default
FORMATS = ("jsonl", "parquet")
FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"
_ESCAPED_TOKEN = re.compile(r"(?:[A-Za-z0-9_-]|%[0-9A-F]{2})+")
_ESCAPED_BYTE = re.compile(r"%([0-9A-F]{2})")


def table_directory(table: TableId) -> str:
    return f"{escape_token(table.schema)}.{escape_token(table.name)}"


def table_from_directory(name: str) -> TableId | None:
    """The table a `<schema>.<table>` directory name stands for (table_directory reversed); None if it is
    not one (another file or directory in the store)."""
    schema, sep, table = name.partition(".")
    if not sep or not _ESCAPED_TOKEN.fullmatch(schema) or not _ESCAPED_TOKEN.fullmatch(table):
        return None
    try:
        return TableId(_unescape(schema), _unescape(table))
    except UnicodeDecodeError:
        return None


def _unescape(token: str) -> str:
    raw = _ESCAPED_BYTE.sub(lambda m: chr(int(m.group(1), 16)), token)  # one char per byte, then decode
    return raw.encode("latin-1").decode("utf-8")


def new_snapshot_id(created_at: float, journal_sequence: int, nonce: str) -> str:
    """Ids sort by creation time: 20261122T110512345Z-<journal sequence>-<nonce>."""
    stamp = dt.datetime.fromtimestamp(created_at, dt.timezone.utc)
    return f"{stamp:%Y%m%dT%H%M%S}{stamp.microsecond // 1000:03d}Z-{journal_sequence}-{nonce}"


@dataclass(frozen=True, slots=True)
class SnapshotPart:
    name: str
    rows: int
    size_bytes: int
    sha256: str


@dataclass(frozen=True, slots=True)
class SnapshotManifest:
    """What a snapshot holds and where it stands in the stream.

    source_position: text Position of the last change applied; stream_sequence: JetStream sequence of
    the last message applied for the table (a restore consumes from the next one); journal_sequence:
    the writing instance's journal sequence at that point (0 when written outside fan-out).
    """

    snapshot_id: str
    table: TableId
    columns: tuple[ColumnInfo, ...]
    key_columns: tuple[str, ...]
    row_count: int
    source_position: str
    stream_sequence: int
    journal_sequence: int
    created_at: float  # Unix seconds
    parts: tuple[SnapshotPart, ...]
    checksum: str  # "sha256:<hex>" of every part file's bytes, in parts order
    source_id: str = ""
    producer: str = "laredo-fanout"
    format: str = FORMAT
    format_version: int = FORMAT_VERSION
    # What the requester attached (OAM CreateSnapshot user_meta): a JSON object, {} when none; read-only.
    user_meta: Mapping[str, Any] = field(default_factory=dict, hash=False)

    @property
    def size_bytes(self) -> int:
        return sum(p.size_bytes for p in self.parts)


def encode_rows(rows: Iterable[Mapping[str, Any]]) -> bytes:
    """JSON lines of rows; values must already be JSON-compatible (no NaN: jsonvalue makes it a string)."""
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
    return "".join([dumps(row) + "\n" for row in rows]).encode("utf-8")


def decode_rows(data: bytes, where: str) -> list[dict[str, Any]]:
    try:
        text = data.decode("utf-8")
        try:  # the lines as one JSON array: one parser call for the part (a line holds no raw newline)
            rows = json.loads("".join(("[", text.rstrip("\n").replace("\n", ","), "]")))
        except ValueError:  # blank lines, or a damaged line: one at a time, to name it
            rows = []
            for number, line in enumerate(text.split("\n"), start=1):
                try:
                    rows += [json.loads(line)] if line.strip() else []
                except ValueError as exc:
                    raise ValueError(f"line {number}: {exc}") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise SnapshotCorrupt(f"{where}: not JSON lines ({exc})") from None
    if not all(isinstance(row, dict) for row in rows):
        raise SnapshotCorrupt(f"{where}: every line must be a JSON object (one row)")
    return rows


def encode_part(index: int, rows: Sequence[Mapping[str, Any]], fmt: str = FORMAT,
                columns: Sequence[ColumnInfo] = ()) -> tuple[SnapshotPart, bytes]:
    """Part `index` of a snapshot in format `fmt`; `columns` (the manifest's) type the Parquet columns."""
    if fmt == "parquet":
        from laredo_core.snapshots.parquet import encode_parquet  # pyarrow only where Parquet is used

        data = encode_parquet(rows, columns)
    else:
        data = encode_rows(rows)
    return part_of(index, len(rows), data, fmt), data


def part_of(index: int, rows: int, data: bytes, fmt: str = FORMAT) -> SnapshotPart:
    """The manifest entry of part `index` holding `rows` rows as `data`."""
    return SnapshotPart(f"rows-{index:05d}.{fmt}", rows, len(data), hashlib.sha256(data).hexdigest())


def decode_part(fmt: str, data: bytes, where: str) -> list[dict[str, Any]]:
    """The rows of one part of a snapshot whose manifest says format `fmt`; SnapshotCorrupt when it is not one."""
    if fmt == "parquet":
        from laredo_core.snapshots.parquet import decode_parquet  # pyarrow only where Parquet is used

        return decode_parquet(data, where)
    return decode_rows(data, where)


class Checksum:
    """The snapshot checksum: sha256 over every part file's bytes, in parts order."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()

    def update(self, data: bytes) -> None:
        self._hash.update(data)

    @property
    def value(self) -> str:
        return f"sha256:{self._hash.hexdigest()}"


def verify_part(part: SnapshotPart, data: bytes, where: str) -> None:
    if len(data) != part.size_bytes or hashlib.sha256(data).hexdigest() != part.sha256:
        raise SnapshotCorrupt(f"{where}: {part.name} does not match its manifest entry (size or sha256)")


def expired(manifests: Sequence[SnapshotManifest], now: float, keep_count: int, max_age: float
            ) -> list[SnapshotManifest]:
    """Snapshots retention removes (input newest first): beyond keep_count or older than max_age
    (0 = no limit for either); the newest is always kept."""
    return [m for index, m in enumerate(manifests)
            if index > 0 and ((keep_count and index >= keep_count) or (max_age and now - m.created_at > max_age))]


def manifest_to_json(manifest: SnapshotManifest) -> bytes:
    created = dt.datetime.fromtimestamp(manifest.created_at, dt.timezone.utc)
    document = {
        "format": manifest.format,
        "format_version": manifest.format_version,
        "snapshot_id": manifest.snapshot_id,
        "table": {"schema": manifest.table.schema, "name": manifest.table.name},
        "source_id": manifest.source_id,
        "columns": [_column_to_json(c) for c in manifest.columns],
        "key_columns": list(manifest.key_columns),
        "row_count": manifest.row_count,
        "source_position": manifest.source_position,
        "stream_sequence": manifest.stream_sequence,
        "journal_sequence": manifest.journal_sequence,
        "created_at": created.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "checksum": manifest.checksum,
        "parts": [{"name": p.name, "rows": p.rows, "size_bytes": p.size_bytes, "sha256": p.sha256}
                  for p in manifest.parts],
        "producer": manifest.producer,
    }
    if manifest.user_meta:  # optional: absent means {} (manifests written before it existed have none)
        document["user_meta"] = dict(manifest.user_meta)
    return json.dumps(document, indent=2, ensure_ascii=False).encode("utf-8")


def manifest_from_json(data: bytes, where: str) -> SnapshotManifest:
    try:
        document = json.loads(data.decode("utf-8"))
        if document.get("format") not in FORMATS:
            raise SnapshotCorrupt(f"{where}: format {document.get('format')!r} is none of {', '.join(FORMATS)}, "
                                  "which this release reads; upgrade laredo")
        if int(document.get("format_version", 1)) > FORMAT_VERSION:
            raise SnapshotCorrupt(f"{where}: format_version {document['format_version']} is newer than "
                                  f"{FORMAT_VERSION}, which this release reads; upgrade laredo")
        created = dt.datetime.fromisoformat(document["created_at"].replace("Z", "+00:00"))
        return SnapshotManifest(
            snapshot_id=str(document["snapshot_id"]),
            table=TableId(document["table"]["schema"], document["table"]["name"]),
            columns=tuple(_column_from_json(c) for c in document["columns"]),
            key_columns=tuple(document.get("key_columns", ())),
            row_count=int(document["row_count"]),
            source_position=str(document["source_position"]),
            stream_sequence=int(document["stream_sequence"]),
            journal_sequence=int(document.get("journal_sequence", 0)),
            created_at=created.timestamp(),
            parts=tuple(SnapshotPart(p["name"], int(p["rows"]), int(p["size_bytes"]), str(p["sha256"]))
                        for p in document["parts"]),
            checksum=str(document.get("checksum", "")),
            source_id=str(document.get("source_id", "")),
            producer=str(document.get("producer", "")),
            format=str(document["format"]),
            user_meta=_user_meta(document.get("user_meta"), where),
        )
    except SnapshotCorrupt:
        raise
    except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SnapshotCorrupt(f"{where}: invalid manifest ({type(exc).__name__}: {exc})") from None


def _user_meta(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SnapshotCorrupt(f"{where}: user_meta must be a JSON object, got {type(value).__name__}")
    return value


def _column_to_json(column: ColumnInfo) -> dict[str, Any]:
    return {"name": column.name, "type_oid": column.type_oid, "type_name": column.type_name,
            "type_modifier": column.type_modifier, "not_null": column.not_null,
            "primary_key_ordinal": column.primary_key_ordinal, "is_identity_key": column.is_identity_key,
            "base_type_oid": column.base_type_oid}


def _column_from_json(document: Mapping[str, Any]) -> ColumnInfo:
    return ColumnInfo(name=str(document["name"]), type_oid=int(document.get("type_oid", 0)),
                      type_name=str(document.get("type_name", "")),
                      type_modifier=int(document.get("type_modifier", -1)),
                      is_identity_key=bool(document.get("is_identity_key", False)),
                      not_null=bool(document.get("not_null", False)),
                      primary_key_ordinal=int(document.get("primary_key_ordinal", 0)),
                      base_type_oid=int(document.get("base_type_oid", 0)))

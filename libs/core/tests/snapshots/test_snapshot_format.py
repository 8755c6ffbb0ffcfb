"""The snapshot format: manifest round trip, JSON lines, checksums, ids and retention."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from laredo_kernel.changes import TableId
from laredo_fanout.domain.errors import SnapshotCorrupt
from laredo_core.snapshots.format import (
    Checksum,
    SnapshotManifest,
    decode_rows,
    encode_part,
    expired,
    manifest_from_json,
    manifest_to_json,
    new_snapshot_id,
    table_directory,
    table_from_directory,
    verify_part,
)
from services.fanout.tests.fanout_testkit import COLUMNS, TABLE


def manifest(snapshot_id: str = "s", created_at: float = 1_700_000_000.5) -> SnapshotManifest:
    part, data = encode_part(0, [{"id": 1, "name": "é", "doc": None}])
    checksum = Checksum()
    checksum.update(data)
    return SnapshotManifest(snapshot_id, TABLE, COLUMNS, ("id",), 1, "0/16B3748:b3", 17, 9, created_at, (part,),
                            checksum.value, source_id="pg")


def test_manifest_round_trips_with_documented_field_names() -> None:
    original = manifest()
    data = manifest_to_json(original)
    document = json.loads(data)
    assert set(document) == {"format", "format_version", "snapshot_id", "table", "source_id", "columns",
                             "key_columns", "row_count", "source_position", "stream_sequence", "journal_sequence",
                             "created_at", "checksum", "parts", "producer"}
    assert document["created_at"] == "2023-11-14T22:13:20.500Z" and document["format"] == "jsonl"
    assert document["parts"][0]["name"] == "rows-00000.jsonl" and document["checksum"].startswith("sha256:")
    assert document["columns"][0] == {"name": "id", "type_oid": 23, "type_name": "int4", "type_modifier": -1,
                                      "not_null": True, "primary_key_ordinal": 1, "is_identity_key": True,
                                      "base_type_oid": 0}
    assert manifest_from_json(data, "here") == original


@pytest.mark.parametrize(("change", "message"), [
    ({"format": "csv"}, "format 'csv' is none of jsonl, parquet"),
    ({"format_version": 2}, "newer than 1"),
    ({"row_count": "many"}, "invalid manifest"),
])
def test_bad_manifests_are_reported(change: dict[str, object], message: str) -> None:
    document = {**json.loads(manifest_to_json(manifest())), **change}
    with pytest.raises(SnapshotCorrupt, match=message):
        manifest_from_json(json.dumps(document).encode(), "here")
    with pytest.raises(SnapshotCorrupt, match="invalid manifest"):
        manifest_from_json(b"{", "here")


def test_rows_are_json_lines_and_parts_are_verified() -> None:
    rows = [{"id": 1, "amount": "12.50", "at": "2026-01-01T00:00:00+00:00", "tags": [1, None], "ok": False}]
    part, data = encode_part(3, rows)
    assert data == b'{"id":1,"amount":"12.50","at":"2026-01-01T00:00:00+00:00","tags":[1,null],"ok":false}\n'
    assert (part.name, part.rows, part.size_bytes) == ("rows-00003.jsonl", 1, len(data))
    assert decode_rows(data, "p") == rows
    verify_part(part, data, "p")
    with pytest.raises(SnapshotCorrupt, match="does not match its manifest entry"):
        verify_part(part, data + b"\n", "p")
    with pytest.raises(SnapshotCorrupt, match="every line must be a JSON object"):
        decode_rows(b"[1]\n", "p")
    with pytest.raises(SnapshotCorrupt, match="not JSON lines"):
        decode_rows(b"{oops\n", "p")


def test_json_lines_decode_whole_with_blank_lines_crlf_and_line_separators_in_values() -> None:
    rows = [{"id": 1, "note": "a\u2028b\u0085c"}, {"id": 2, "note": "line\nbreak"}]
    _, data = encode_part(0, rows)
    assert "\u2028".encode() in data  # written raw (ensure_ascii off): not a line end of JSON lines
    assert decode_rows(data, "p") == rows
    assert decode_rows(data.replace(b"\n", b"\r\n"), "p") == rows
    assert decode_rows(b"\n" + data.replace(b"}\n", b"}\n\n"), "p") == rows
    assert decode_rows(b"", "p") == []
    with pytest.raises(SnapshotCorrupt, match=r"not JSON lines \(line 3: "):
        decode_rows(data + b'{"id": 3,\n', "p")


def test_ids_sort_by_creation_time_and_tables_map_to_safe_directories() -> None:
    ids = [new_snapshot_id(t, 5, "abc") for t in (1_700_000_000.001, 1_700_000_000.002, 1_800_000_000.0)]
    assert ids == sorted(ids) and ids[0] == "20231114T221320001Z-5-abc"
    assert table_directory(TableId("public", "items")) == "public.items"
    assert table_directory(TableId("my schema", "a/b.c")) == "my%20schema.a%2Fb%2Ec"


def test_retention_keeps_the_newest_and_drops_by_count_and_age() -> None:
    now = 1_700_010_000.0
    snapshots = [manifest(f"s{i}", now - i * 600) for i in range(6)]  # newest first, 10 minutes apart
    assert [m.snapshot_id for m in expired(snapshots, now, keep_count=3, max_age=0)] == ["s3", "s4", "s5"]
    assert [m.snapshot_id for m in expired(snapshots, now, keep_count=0, max_age=1500)] == ["s3", "s4", "s5"]
    assert expired(snapshots, now, keep_count=0, max_age=0) == []
    old = [replace(m, created_at=m.created_at - 86_400) for m in snapshots[:2]]
    assert [m.snapshot_id for m in expired(old, now, keep_count=5, max_age=60)] == ["s1"]  # never the newest


def test_user_meta_is_optional_in_the_manifest() -> None:
    meta = {"reason": "before upgrade", "by": "ops", "n": 3, "nested": {"tags": ["a", None]}}
    data = manifest_to_json(replace(manifest(), user_meta=meta))
    assert json.loads(data)["user_meta"] == meta and json.loads(data)["format_version"] == 1
    assert manifest_from_json(data, "here").user_meta == meta
    plain = json.loads(manifest_to_json(manifest()))
    assert "user_meta" not in plain  # written only when there is some; absent reads as {}
    assert manifest_from_json(json.dumps(plain).encode(), "here").user_meta == {}
    with pytest.raises(SnapshotCorrupt, match="user_meta must be a JSON object"):
        manifest_from_json(json.dumps({**plain, "user_meta": [1]}).encode(), "here")


@pytest.mark.parametrize("table", [TableId("public", "items"), TableId("my schema", "a/b.c"),
                                   TableId("ünï", "%41")])
def test_table_directories_map_back_to_their_tables(table: TableId) -> None:
    assert table_from_directory(table_directory(table)) == table


@pytest.mark.parametrize("name", ["items", ".items", "public.", "%.x", "a.b.c", "my schema.x", "a.%zz", "a.%FF"])
def test_other_names_are_not_table_directories(name: str) -> None:
    assert table_from_directory(name) is None

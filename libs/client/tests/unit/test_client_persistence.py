"""The local snapshot file: round trip, atomic replace, and every way a file can be unusable."""

from __future__ import annotations

import json
import logging
import stat
from pathlib import Path

import pytest

from laredo_client.client_replica import Cursor
from laredo_client.persistence import LocalSnapshot, load_local_snapshot, save_local_snapshot
from laredo_client.values import Column

FILTERS = [{"field": "team", "kind": "equals", "value": "a"}]


def snapshot(rows: list[dict] | None = None, **cursor: object) -> LocalSnapshot:
    values = {"sequence": 7, "source_position": "0/40:2", "snapshot_id": "s1", "server_id": "", "journal_epoch": "",
              **cursor}
    return LocalSnapshot(schema="public", table="items", filters=FILTERS, server_address="fanout:4002",
                         cursor=Cursor(**values), key_columns=("id",),  # type: ignore[arg-type]
                         columns=(Column("id", "int8", True, 1), Column("doc", "jsonb")),
                         rows=rows if rows is not None else [{"id": 2**60, "doc": {"a": [1, None]}}])


def load(path: Path, **overrides: object) -> LocalSnapshot | None:
    args = {"schema": "public", "table": "items", "filters": FILTERS, **overrides}
    return load_local_snapshot(path, **args)  # type: ignore[arg-type]


def test_round_trip_keeps_rows_cursor_and_columns(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "items.json"
    save_local_snapshot(path, snapshot())
    loaded = load(path)
    assert loaded is not None and loaded == snapshot()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text())["last_source_position"] == "0/40:2"


def test_a_failed_save_leaves_the_previous_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "items.json"
    save_local_snapshot(path, snapshot())
    before = path.read_bytes()
    with pytest.raises(TypeError):
        save_local_snapshot(path, snapshot(rows=[{"id": 1, "doc": object()}]))
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["items.json"]


def test_a_missing_file_means_start_fresh(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="laredo_client"):
        assert load(tmp_path / "absent.json") is None
    assert "no local snapshot at" in caplog.text and "starting fresh" in caplog.text


@pytest.mark.parametrize(("content", "reason"), [
    ('{"format": 1, "rows": [', "Expecting"),  # truncated by a crash of some other writer
    ("[]", "not a JSON object"),
    ('{"format": 99}', "format 99"),
    ("\x00\x01binary", "Expecting value"),
])
def test_corrupt_files_are_ignored_with_a_clear_log_line(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                         content: str, reason: str) -> None:
    path = tmp_path / "items.json"
    path.write_text(content)
    with caplog.at_level(logging.WARNING, logger="laredo_client"):
        assert load(path) is None
    assert f"local snapshot {path} is unusable" in caplog.text and reason in caplog.text
    assert "starting fresh" in caplog.text


@pytest.mark.parametrize(("change", "reason"), [
    ({"table": "other"}, "holds public.other"),
    ({"filters": []}, "taken with filters"),
    ({"last_seq": "7"}, "'last_seq' must be a int"),
    ({"rows": {"1": {}}}, "'rows' must be a list"),
    ({"last_source_position": "", "snapshot_id": ""}, "no source position, snapshot id or server sequence"),
])
def test_files_for_another_table_filter_or_shape_are_ignored(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                            change: dict, reason: str) -> None:
    path = tmp_path / "items.json"
    save_local_snapshot(path, snapshot())
    document = json.loads(path.read_text())
    document.update(change)
    path.write_text(json.dumps(document))
    with caplog.at_level(logging.WARNING, logger="laredo_client"):
        assert load(path) is None
    assert reason in caplog.text


def test_a_sequence_from_a_named_journal_is_enough_to_resume(tmp_path: Path) -> None:
    path = tmp_path / "items.json"
    save_local_snapshot(path, snapshot(source_position="", snapshot_id="", server_id="fanout-a", journal_epoch="e1"))
    loaded = load(path)
    assert loaded is not None and (loaded.cursor.server_id, loaded.cursor.journal_epoch) == ("fanout-a", "e1")


def test_a_file_from_before_journal_epochs_never_resumes_by_its_sequence(tmp_path: Path) -> None:
    path = tmp_path / "items.json"
    save_local_snapshot(path, snapshot(server_id="fanout-a"))
    document = json.loads(path.read_text())
    del document["journal_epoch"]
    path.write_text(json.dumps(document))
    loaded = load(path)
    assert loaded is not None and loaded.cursor.journal_epoch == "" and not loaded.cursor.resumable_sequence
    document["last_source_position"] = document["snapshot_id"] = ""
    path.write_text(json.dumps(document))
    assert load(path) is None, "a sequence of an unknown epoch is nothing to resume from"

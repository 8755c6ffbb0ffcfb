"""Output for people (tables, cells, field blocks) and for scripts (JSON from protobuf messages)."""

from __future__ import annotations

import json

import pytest
from google.protobuf import struct_pb2
from laredo.v1 import oam_pb2, query_pb2

from laredo_cli.output import format_value, render_fields, render_rows, render_table, shorten
from laredo_cli.protojson import message_to_json, number, python_to_value, struct_to_dict


def test_tables_align_columns_and_right_align_numbers() -> None:
    lines = render_table(["NAME", "ROWS", "NOTE"], [["users", "7", ""], ["orders_2026", "12345", "x"]], right=[1])
    assert lines == ["NAME          ROWS  NOTE",
                     "users            7",
                     "orders_2026  12345  x"]


def test_a_row_with_the_wrong_number_of_cells_is_a_bug() -> None:
    with pytest.raises(ValueError, match="2 cells for 3 headers"):
        render_table(["A", "B", "C"], [["1", "2"]])


@pytest.mark.parametrize(("value", "shown"), [
    (None, "null"), (True, "true"), (False, "false"), (7, "7"), (7.0, "7"), (2.5, "2.5"),
    ("a\nb\tc", "a\\nb\\tc"), ({"b": 1, "a": [1, None]}, '{"a":[1,null],"b":1}'), ("x", "x"),
])
def test_cells(value: object, shown: str) -> None:
    assert format_value(value) == shown


def test_long_cells_are_cut() -> None:
    assert shorten("abcdefghij", 6) == "abc..."
    assert shorten("abc", 6) == "abc" and shorten("abcdefghij", None) == "abcdefghij"


def test_row_tables_sort_columns_and_show_missing_values_empty() -> None:
    rows = [{"name": "a", "id": 1, "doc": "x" * 100}, {"id": 22, "name": None}]
    lines = render_rows(rows)
    assert lines[0].split() == ["doc", "id", "name"]
    assert lines[1].endswith(" 1  a") and "..." in lines[1] and len(lines[1]) < 80
    assert lines[2].split() == ["22", "null"]
    wide = render_rows(rows, wide=True)
    assert "x" * 100 in wide[1]
    assert render_rows(rows, ["name", "id"])[0].split() == ["name", "id"]


def test_field_blocks_align_values() -> None:
    assert render_fields([("state", "STREAMING"), ("last change", "-")]) == ["state:        STREAMING",
                                                                           "last change:  -"]


def test_numbers_from_struct_doubles() -> None:
    assert number(7.0) == 7 and isinstance(number(7.0), int)
    assert number(2.5) == 2.5 and number(2.0**60) == 2.0**60
    assert isinstance(number(float("inf")), float)


def test_messages_as_json_for_scripts() -> None:
    status = oam_pb2.GetStatusResponse(state=oam_pb2.SERVICE_STATE_STREAMING, pipelines=[oam_pb2.PipelineStatus(
        pipeline_id="pg:public.users:indexed-memory", state=oam_pb2.PIPELINE_STATE_STREAMING, row_count=2**40)])
    status.sources.add(source_id="pg", lag_bytes=184).lag_time.FromMilliseconds(250)
    status.last_change_at.FromSeconds(1_767_225_600)
    document = message_to_json(status)
    assert document["state"] == "SERVICE_STATE_STREAMING"
    assert document["pipelines"][0]["row_count"] == 2**40  # a number, not the proto3 JSON string
    assert document["pipelines"][0]["last_change_at"] is None  # unset message: null, still present
    assert document["pipelines"][0]["error_message"] == ""  # defaults are present
    assert document["last_change_at"] == "2026-01-01T00:00:00Z"
    assert document["sources"][0]["lag_time"] == 0.25 and document["sources"][0]["source_details"] is None
    assert document["snapshot_status"] is None
    json.dumps(document)  # serializable as is


def test_oneof_members_appear_only_when_set() -> None:
    event = oam_pb2.WatchStatusResponse(row_change=oam_pb2.RowChange(pipeline_id="p", action="INSERT"))
    document = message_to_json(event)
    assert set(document) == {"timestamp", "row_change"}
    assert document["row_change"]["action"] == "INSERT"


def test_rows_as_json_objects_with_whole_numbers() -> None:
    row = struct_pb2.Struct()
    row.update({"id": 42, "price": 1.25, "big": "9007199254740993", "tags": ["a", 1], "doc": {"k": None},
                "ok": True})
    answer = query_pb2.GetRowResponse(found=True, row=row)
    assert message_to_json(answer) == {"found": True, "row": {
        "big": "9007199254740993", "doc": {"k": None}, "id": 42, "ok": True, "price": 1.25, "tags": ["a", 1]}}
    assert list(struct_to_dict(row)) == sorted(struct_to_dict(row))
    assert message_to_json(query_pb2.GetRowResponse()) == {"found": False, "row": None}


@pytest.mark.parametrize(("value", "kind"), [
    ("text", "string_value"), (5, "number_value"), (True, "bool_value"), (None, "null_value"),
    ([1, "a"], "list_value"), ({"a": 1}, "struct_value"), (2**53 + 1, "string_value"),
])
def test_values_sent_to_the_server(value: object, kind: str) -> None:
    message = python_to_value(value)
    assert message.WhichOneof("kind") == kind
    if kind == "string_value" and isinstance(value, int):
        assert message.string_value == str(value)  # a double would have rounded it

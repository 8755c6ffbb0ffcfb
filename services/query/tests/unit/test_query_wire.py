"""Hand-framed responses parse with the generated classes into what protobuf itself would build."""

from __future__ import annotations

from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToDict

from laredo.v1 import query_pb2 as pb
from laredo_kernel.changes import Action
from laredo_kernel.position import Position
from laredo_kernel.struct_wire import struct_fields
from laredo_query.application.queries import RowPage
from laredo_query.domain.events import ChangeEvent
from laredo_query.domain.row_store import StoredRow
from laredo_query.entrypoints.grpc import mappers, wire

#: A row as the table holds it: the Struct of its JSON-compatible values (numeric text, big integers as strings)
ROW = StoredRow(7, struct_fields({"id": 7, "name": "é", "price": "1.50", "big": str(2**60), "tags": ["a", None],
                                  "ok": True, "none": None}), Position(0x10, 3))


def test_varints_match_protobuf_for_small_large_and_negative_values() -> None:
    for value in (1, 127, 128, 300, 2**40, -1, -(2**63)):
        assert pb.CountRowsResponse.FromString(mappers.count(value)).count == value


def test_found_row_and_rows() -> None:
    found = pb.LookupResponse.FromString(mappers.found_row(ROW))
    assert found.found and MessageToDict(found.row) == {"id": 7.0, "name": "é", "price": "1.50",
                                                        "big": str(2**60), "tags": ["a", None], "ok": True,
                                                        "none": None}
    assert pb.GetRowResponse.FromString(mappers.found_row(None)) == pb.GetRowResponse()
    assert mappers.found_row(ROW).endswith(ROW.encoded), "the row's Struct is sent as the table holds it"
    assert len(pb.LookupAllResponse.FromString(mappers.rows([ROW, ROW])).rows) == 2
    empty = StoredRow(1, struct_fields({}), None)
    assert pb.LookupResponse.FromString(mappers.found_row(empty)).HasField("row")


def test_row_page() -> None:
    page = pb.ListRowsResponse.FromString(mappers.row_page(RowPage([ROW], "v1.token", 12)))
    assert len(page.rows) == 1 and page.next_page_token == "v1.token" and page.total_count == 12
    assert pb.ListRowsResponse.FromString(mappers.row_page(RowPage([], "", 0))) == pb.ListRowsResponse()


def test_change_events_and_replayed_rows() -> None:
    event = ChangeEvent(Action.UPDATE, Position(0x1_0000_0010, 2), 901, 1_700_000_000_123_456, ROW, ROW)
    response = pb.SubscribeResponse.FromString(mappers.change_event(event))
    assert (response.action, response.position, response.xid) == ("UPDATE", "1/00000010:2", 901)
    assert (response.timestamp.seconds, response.timestamp.nanos) == (1_700_000_000, 123_456_000)
    assert response.HasField("old_values") and response.HasField("new_values")
    assert mappers.change_event(event) is event.wire, "serialized once, shared by every subscriber"
    truncate = pb.SubscribeResponse.FromString(mappers.change_event(
        ChangeEvent(Action.TRUNCATE, Position(1, 0), 0, 0, None, None)))
    assert truncate.action == "TRUNCATE" and not truncate.HasField("old_values") and not truncate.HasField("new_values")
    replayed = pb.SubscribeResponse.FromString(mappers.replayed_row(ROW, 5_000_000))
    assert (replayed.action, replayed.position, replayed.timestamp.seconds) == ("INSERT", "0/00000010:3", 5)
    assert not replayed.HasField("old_values")


def test_request_values_become_json_values() -> None:
    values = [struct_pb2.Value(number_value=5.0), struct_pb2.Value(string_value="x"),
              struct_pb2.Value(bool_value=True), struct_pb2.Value(null_value=0)]
    listed = struct_pb2.Value()
    listed.list_value.values.add().number_value = 1
    nested = struct_pb2.Value()
    nested.struct_value.fields["a"].string_value = "b"
    assert mappers.key_values([*values, listed, nested], "key_values") == [5.0, "x", True, None, [1.0], {"a": "b"}]
    assert wire.string_field(1, "") == b"" and wire.int_field(1, 0) == b""

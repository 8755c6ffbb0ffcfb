"""ChangeBatch decoding: typed rows, TOAST markers, key-only old rows, and corrupt input."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from laredo.stream.v1 import change_stream_pb2 as pb
from laredo_kernel.changes import Action, BatchKind, ColumnInfo
from laredo_kernel.errors import ProtocolError
from laredo_kernel.position import Position
from laredo_core.stream.codec import columns_to_proto, decode_batch
from laredo_kernel.tuples import UNCHANGED, encode_tuple

COLUMNS = (ColumnInfo("id", 20, "int8", is_identity_key=True, not_null=True, primary_key_ordinal=1),
           ColumnInfo("body", 25, "text"), ColumnInfo("qty", 23, "int4"))


def batch(*changes: pb.Change, kind: int = pb.BATCH_KIND_TRANSACTION) -> bytes:
    return pb.ChangeBatch(source_id="pg", kind=kind, table=pb.TableRef(schema="public", name="t"),
                          columns=columns_to_proto(COLUMNS), commit_lsn=0x100, end_lsn=0x180, xid=7,
                          commit_time_unix_us=1_700_000_000_000_000, changes=list(changes)).SerializeToString()


def test_decodes_typed_rows_positions_and_key_columns() -> None:
    info = decode_batch(batch(
        pb.Change(action=pb.ACTION_INSERT, ordinal=0, new_tuple=encode_tuple([b"1", b"hello", None])),
        pb.Change(action=pb.ACTION_UPDATE, ordinal=1, new_tuple=encode_tuple([b"1", UNCHANGED, b"5"])),
        pb.Change(action=pb.ACTION_DELETE, ordinal=2, old_tuple=encode_tuple([b"1", None, None]),
                  old_is_key_only=True),
    ))
    assert info.kind is BatchKind.TRANSACTION and str(info.table) == "public.t" and info.key_columns == ("id",)
    insert, update, delete = info.changes
    assert insert.action is Action.INSERT and insert.new == {"id": 1, "body": "hello", "qty": None}
    assert update.new == {"id": 1, "body": UNCHANGED, "qty": 5}
    assert delete.old == {"id": 1} and delete.old_is_key_only
    assert [c.position for c in info.changes] == [Position(0x100, 0), Position(0x100, 1), Position(0x100, 2)]


def test_rejects_tuples_that_do_not_match_the_columns() -> None:
    with pytest.raises(ProtocolError, match="2 values but the relation has 3 columns"):
        decode_batch(batch(pb.Change(action=pb.ACTION_INSERT, new_tuple=encode_tuple([b"1", b"x"]))))
    with pytest.raises(ProtocolError, match="column 'qty'"):
        decode_batch(batch(pb.Change(action=pb.ACTION_INSERT, new_tuple=encode_tuple([b"1", b"x", b"nan?"]))))
    with pytest.raises(ProtocolError, match="carries no new row"):
        decode_batch(batch(pb.Change(action=pb.ACTION_INSERT)))


@given(st.binary(max_size=200))
def test_random_bytes_raise_only_protocol_errors(data: bytes) -> None:
    try:
        decode_batch(data)
    except ProtocolError:
        pass

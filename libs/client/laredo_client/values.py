"""Rows as clients see them: Struct bytes to dict, integer columns back to int, column metadata.

Every other value is what the server sent: numeric, money, interval and the like as PostgreSQL's text (a
numeric 0.0000001 is the string "0.0000001", never 1E-7 or a float)."""

from __future__ import annotations

import struct
import threading
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from google.protobuf import struct_pb2
from google.protobuf.message import DecodeError

from laredo.replication.v1 import replication_pb2 as pb

from laredo_kernel.sync_wire import NotCanonical, WireError
from laredo_kernel.struct_wire import StructDecoder

Row = dict[str, Any]
ROW_CACHE_SIZE = 8192  # decoded rows kept by their bytes, per generation
#: Column types (the handshake's data_type) whose values are integers: Struct numbers are doubles and integers
#: beyond 2**53 travel as decimal strings, so their values are turned back into int (array elements too).
INTEGER_TYPES = frozenset({"int2", "int4", "int8", "oid", "xid", "smallint", "integer", "bigint",
                           "_int2", "_int4", "_int8", "_oid", "_xid"})


@dataclass(frozen=True, slots=True)
class Column:
    """One column of the replicated table, as the server's handshake describes it."""

    name: str
    data_type: str
    not_null: bool = False
    primary_key_ordinal: int = 0  # 1-based position in the primary key; 0 = not part of it

    @classmethod
    def from_proto(cls, definition: pb.ColumnDefinition) -> Column:
        ordinal = definition.primary_key_ordinal or (1 if definition.is_primary_key else 0)
        return cls(definition.column_name, definition.data_type, definition.not_null, ordinal)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> Column:
        return cls(str(value["name"]), str(value["data_type"]), bool(value.get("not_null", False)),
                   int(value.get("primary_key_ordinal", 0)))


def primary_key_of(columns: Iterable[Column]) -> tuple[str, ...]:
    keyed = sorted((c for c in columns if c.primary_key_ordinal > 0), key=lambda c: c.primary_key_ordinal)
    return tuple(c.name for c in keyed)


class RowDecoder:
    """Struct bytes to rows, the values of the columns the handshake declares as integers turned back into int.

    The rows of journal entries and snapshots are shared: the last decoded rows are kept by their bytes (two
    generations of ROW_CACHE_SIZE), so bytes seen again (an UPDATE's old values are the row's previous new
    values; the clients of one process receive the same rows) are decoded once. Such rows must not be mutated:
    the client stores them, hands them to listeners, and its reads return copies. Used from one event loop;
    concurrent use from several threads at worst misses the cache."""

    __slots__ = ("integer_columns", "_structs", "_recent", "_older", "__weakref__")

    def __init__(self, columns: Iterable[Column] = ()) -> None:
        self.integer_columns = tuple(c.name for c in columns if c.data_type in INTEGER_TYPES)
        self._structs = StructDecoder(frozenset(self.integer_columns))
        self._recent: dict[bytes, Row] = {}
        self._older: dict[bytes, Row] = {}

    def decode(self, message: struct_pb2.Struct) -> Row:
        """A Struct message as a new row of its own."""
        return self._decode(message.SerializeToString(), None)

    def row(self, data: bytes, start: int, end: int) -> Row:
        """The Struct in data[start:end], shared with every other decode of the same bytes."""
        raw = data[start:end]
        row = self._recent.get(raw)
        if row is None:
            row = self._older.get(raw)
            if row is None:
                row = self._decode(raw, None)
            recent = self._recent
            if len(recent) >= ROW_CACHE_SIZE:
                self._older, self._recent = recent, {}
            self._recent[raw] = row
        return row

    def fields(self, data: bytes, start: int, end: int, names: frozenset[str]) -> Row:
        """The Struct in data[start:end] with at least the fields `names` (an old row whose key is all that
        is needed): the whole row if these bytes were decoded recently, else just those fields."""
        raw = data[start:end]
        row = self._recent.get(raw) or self._older.get(raw)
        return row if row is not None else self._decode(raw, names)

    def _decode(self, raw: bytes, names: frozenset[str] | None) -> Row:
        structs = self._structs
        try:
            try:
                return structs.decode(raw, 0, len(raw)) if names is None else structs.fields(raw, 0, len(raw), names)
            except NotCanonical:  # valid, but laid out unlike what serializers write: read it as protobuf does
                message = struct_pb2.Struct.FromString(raw)
                message.DiscardUnknownFields()  # an entry protobuf did not take into the map stays unknown
                raw = message.SerializeToString()
                return structs.decode(raw, 0, len(raw))
        except (IndexError, UnicodeDecodeError, struct.error, DecodeError) as exc:
            raise WireError(f"undecodable Struct of {len(raw)} bytes: {exc}") from exc


_shared_lock = threading.Lock()
_shared: weakref.WeakValueDictionary[tuple[str, ...], RowDecoder] = weakref.WeakValueDictionary()


def shared_row_decoder(columns: Iterable[Column]) -> RowDecoder:
    """The RowDecoder of these columns that every client of this process uses, so they share decoded rows
    (decoding depends only on which columns are integers)."""
    decoder = RowDecoder(columns)
    key = tuple(sorted(decoder.integer_columns))
    with _shared_lock:
        return _shared.setdefault(key, decoder)

"""The query use cases: route a request to its table, validate it, and read the table's current state.

Reads are synchronous on the event loop, so each sees the table between two applied stream messages:
never half a message (a message holds one table's changes of one transaction, or a chunk of a large one).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from laredo_kernel.changes import TableId

from laredo_query.application.query_table import QueryTable
from laredo_query.application.subscriptions import Subscription
from laredo_query.domain.errors import InvalidRequest, SubscriptionEnded, TableNotFound, TableNotReady
from laredo_query.domain.indexes import PRIMARY
from laredo_query.domain.keys import KeyKind
from laredo_query.domain.paging import decode_token, encode_token, page_size
from laredo_query.domain.row_store import StoredRow


@dataclass(frozen=True, slots=True)
class RowPage:
    rows: list[StoredRow]
    next_page_token: str
    total_count: int


@dataclass(frozen=True, slots=True)
class SubscribeStream:
    """The rows to replay (a copy taken together with registering the subscription), then live events."""

    table: QueryTable
    replay: list[StoredRow]
    subscription: Subscription

    def close(self) -> None:
        self.table.subscribers.close(self.subscription)


class QueryService:
    def __init__(self, tables: Iterable[QueryTable]) -> None:
        self._tables = {t.table: t for t in tables}

    @property
    def tables(self) -> list[QueryTable]:
        return list(self._tables.values())

    def find(self, schema: str, table: str) -> QueryTable:
        missing = [name for name, value in (("schema", schema), ("table", table)) if not value]
        if missing:
            raise InvalidRequest(f"{' and '.join(missing)} required: name the table to query, "
                                 "e.g. schema='public', table='users'")
        target = self._tables.get(TableId(schema, table))
        if target is None:
            raise TableNotFound(schema, table, (str(t) for t in self._tables))
        return target

    def lookup(self, schema: str, table: str, index_name: str, key_values: Sequence[Any]) -> StoredRow | None:
        """The row whose key in the index equals key_values (for a non-unique index: the match indexed first)."""
        target = self._serving(schema, table)
        return target.indexed.lookup_first(index_name or target.indexed.default_index, key_values)

    def lookup_all(self, schema: str, table: str, index_name: str, key_values: Sequence[Any]) -> list[StoredRow]:
        target = self._serving(schema, table)
        if not index_name:
            raise InvalidRequest(f"index_name is required for LookupAll: name one of the indexes of "
                                 f"{target.name} ({', '.join(target.indexed.index_names)})")
        return target.indexed.lookup(index_name, key_values)

    def get_row(self, schema: str, table: str, primary_key: int,
                primary_key_values: Sequence[Any]) -> StoredRow | None:
        """By primary_key_values when given, else by the integer primary_key (single-column keys only)."""
        target = self._serving(schema, table)
        if primary_key_values:
            values: Sequence[Any] = primary_key_values
        else:
            spec = target.indexed.key_spec
            if len(spec.fields) != 1:
                raise InvalidRequest(f"{target.name} has a composite primary key ({', '.join(spec.fields)}): "
                                     "send primary_key_values, one value per key column in that order")
            if spec.kinds[0] is not KeyKind.INTEGER:
                raise InvalidRequest(f"the primary key column {spec.fields[0]!r} of {target.name} is "
                                     f"{spec.kinds[0].value}, but primary_key carries an integer: send "
                                     "primary_key_values instead")
            values = [primary_key]
        return target.indexed.lookup_first(PRIMARY, values)

    def list_rows(self, schema: str, table: str, requested_page_size: int, page_token: str) -> RowPage:
        """A page of rows in primary key order; next_page_token is empty on the last page."""
        target = self._serving(schema, table)
        indexed = target.indexed
        size = page_size(requested_page_size)
        cursor = decode_token(page_token, target.name, indexed.key_spec)
        rows, more = indexed.page(cursor.key, size, start=cursor.start)
        token = encode_token(target.name, indexed.key_spec, rows[-1].key) if more else ""
        return RowPage(rows, token, len(indexed))

    def count_rows(self, schema: str, table: str) -> int:
        return len(self._serving(schema, table).indexed)

    def subscribe(self, schema: str, table: str, replay_existing: bool) -> SubscribeStream:
        """Register first, copy the rows in the same step: the replay plus the events are the whole story."""
        target = self.find(schema, table)
        subscription = target.subscribers.open()
        replay = target.indexed.rows() if replay_existing else []
        return SubscribeStream(target, replay, subscription)

    def end_subscriptions(self, error: SubscriptionEnded) -> None:
        for target in self._tables.values():
            target.subscribers.end_all(error)

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        tables = {t.name: t.status() for t in self._tables.values()}
        return all(t.ready for t in self._tables.values()), {"tables": tables}

    def _serving(self, schema: str, table: str) -> QueryTable:
        target = self.find(schema, table)
        if not target.serving:
            progress = ("baseline complete, catching up with the stream" if target.baseline_complete
                        else f"baseline in progress, {len(target.indexed)} rows so far")
            raise TableNotReady(f"{target.name} is not loaded yet ({progress}); retry shortly, or wait "
                                "until /health/ready or gRPC health reports it ready")
        target.reads += 1
        return target

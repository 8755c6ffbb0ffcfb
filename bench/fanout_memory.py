"""Memory of fan-out state per row and per journal entry, measured with tracemalloc on the service's own code."""

from __future__ import annotations

import gc
import tracemalloc

from laredo_kernel.changes import ColumnInfo, TableId
from laredo_core.stream.codec import decode_batch
from laredo_fanout.adapters.memory import ManualClock, SilentObserver
from laredo_fanout.adapters.protobuf_sync_encoder import ProtobufSyncEncoder
from laredo_fanout.application.replicator import Replicator
from laredo_fanout.application.table_replica import ReplicaLimits, TableReplica
from laredo_fanout.ports import FeedMessage

from bench.fanout_stream import TABLE, baseline_messages, update_transaction

_TABLE = TableId("public", TABLE)


def _loaded(rows: int, journal_entries: int) -> tuple[TableReplica, Replicator]:
    encoder = ProtobufSyncEncoder()
    replica = TableReplica("bench", _TABLE, ReplicaLimits(journal_entries, 0, 5.0, 0), encoder)
    replicator = Replicator({_TABLE: replica}, encoder, ManualClock(), SilentObserver())
    for sequence, data in enumerate(baseline_messages(rows), start=1):
        replicator.on_batch(FeedMessage(_TABLE, decode_batch(data, json_values=True), sequence))
    return replica, replicator


def _traced() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def measure_memory(rows: int, columns: tuple[ColumnInfo, ...]) -> None:
    tracemalloc.start()
    before = _traced()
    replica, _ = _loaded(rows, journal_entries=1)  # the journal keeps 1 entry: this is the state alone
    state = (_traced() - before) / rows
    del replica
    replica, replicator = _loaded(rows, journal_entries=rows + 1)
    loaded = _traced()
    for start in range(0, rows, 1000):
        data = update_transaction(start, min(1000, rows - start), rows)
        replicator.on_batch(FeedMessage(_TABLE, decode_batch(data, json_values=True), 0))
    entries = replica.journal.current_sequence - rows
    journal = (_traced() - loaded) / entries
    tracemalloc.stop()
    updates = replica.journal.entries_after(rows, entries)
    wire = sum(len(e.encoded) for e in updates) / len(updates)
    row_wire = len(replica.state.rows()[0].encoded)
    print(f"memory ({len(columns)} columns, ~{row_wire} bytes on the wire per row): state {state:,.0f} bytes/row "
          f"(goal 300: {'met' if state <= 300 else 'MISSED'}); journal {journal:,.0f} bytes per UPDATE entry over "
          f"{entries:,} entries, whose message (old and new row) is {wire:,.0f} bytes on the wire: "
          f"{journal / wire:.1f}x (goal 2x: {'met' if journal <= 2 * wire else 'MISSED'})")

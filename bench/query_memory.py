"""Query's table in memory and its load from a snapshot, measured in-process on the service's own code.

- bytes per row: tracemalloc over an IndexedTable of --rows rows of bench/query.py's table (id bigint primary
  key, email text, status text, qty int, note text) with one unique index (email), the rows applied as the
  stream gives them;
- load from a snapshot: the same rows as a snapshot of JSON-lines parts, loaded the way a starting query
  instance loads its newest snapshot (SnapshotLoader: every part checked, each row applied and held as its
  Struct bytes, indexed); the store's reads are left out (a local disk or S3 adds its transfer time).
Usage: .venv/bin/python bench/query_memory.py [--rows 1000000]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from laredo_core.snapshots.format import Checksum, SnapshotManifest, encode_part  # noqa: E402
from laredo_kernel.changes import Action, ColumnInfo, RowChange, TableId  # noqa: E402
from laredo_kernel.position import Position  # noqa: E402
from laredo_query.application.snapshot_loader import SnapshotLoader  # noqa: E402
from laredo_query.domain.indexed_table import IndexedTable  # noqa: E402
from laredo_query.domain.indexes import IndexDefinition  # noqa: E402

#: bench/query.py's table: id bigint primary key, email text, status text, qty int, note text
COLUMNS = (ColumnInfo("id", 20, "int8", is_identity_key=True, not_null=True, primary_key_ordinal=1),
           *(ColumnInfo(name, oid, kind) for name, oid, kind in (("email", 25, "text"), ("status", 25, "text"),
                                                                 ("qty", 23, "int4"), ("note", 25, "text"))))
UNIQUE_EMAIL = (IndexDefinition("lookup", ("email",), True),)
BYTES_GOAL, READY_GOAL = 350, 10.0  # per row with one unique index; seconds for one million rows
_STATUS = ("new", "paid", "shipped", "void")


def row(i: int) -> dict[str, object]:
    return {"id": i, "email": f"user{i}@example.com", "status": _STATUS[i % 4], "qty": i % 1000,
            "note": hashlib.md5(str(i).encode()).hexdigest()}  # noqa: S324 - test data, as the SQL's md5()


def _traced() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def measure_bytes_per_row(rows: int) -> float:
    tracemalloc.start()
    before = _traced()
    table = IndexedTable("bench", UNIQUE_EMAIL)
    table.set_columns(COLUMNS, ("id",))
    position = Position(0x1000000, 0)
    for i in range(1, rows + 1):
        table.apply(RowChange(position, Action.INSERT, None, row(i)))
    per_row = (_traced() - before) / rows
    tracemalloc.stop()
    del table
    return per_row


def measure_snapshot_load(rows: int, part_rows: int = 100_000) -> float:
    parts, datas, checksum = [], [], Checksum()
    for index, start in enumerate(range(1, rows + 1, part_rows)):
        part, data = encode_part(index, [row(i) for i in range(start, min(start + part_rows, rows + 1))])
        checksum.update(data)
        parts.append(part)
        datas.append(data)
    manifest = SnapshotManifest("bench-snapshot", TableId("public", "bench_items"), COLUMNS, ("id",), rows,
                                "0/1000000:0", 1, 0, time.time(), tuple(parts), checksum.value)
    gc.collect()
    started = time.perf_counter()
    loader = SnapshotLoader("bench", UNIQUE_EMAIL, manifest)
    for part, data in zip(parts, datas):
        loader.add_part(part, data)
    table = loader.finish()
    seconds = time.perf_counter() - started
    assert len(table) == rows, f"{len(table)} rows loaded of {rows}"
    return seconds


def report(rows: int) -> None:
    """Print both figures for a table of `rows` rows."""
    per_row = measure_bytes_per_row(rows)
    print(f"query table of {rows:,} rows with one unique index (email): {per_row:,.0f} bytes per row "
          f"(goal {BYTES_GOAL}: {'met' if per_row <= BYTES_GOAL else 'MISSED'})")
    seconds = measure_snapshot_load(rows)
    scaled = seconds * 1_000_000 / rows
    print(f"load from a snapshot (JSON lines, checked, encoded, indexed; store reads excluded): {rows:,} rows in "
          f"{seconds:.1f}s = {rows / seconds:,.0f} rows/s; {scaled:.1f}s for one million rows "
          f"(goal {READY_GOAL:.0f}s: {'met' if scaled <= READY_GOAL else 'MISSED'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    report(parser.parse_args().rows)


if __name__ == "__main__":
    main()

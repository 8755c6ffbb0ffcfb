"""Client library CPU per applied journal entry: decode + apply of SyncResponse bytes, as a stream hands them over.

The messages are built with the fan-out's own wire encoder (laredo_fanout.adapters.protobuf_wire), so the bytes
are what a server sends: rows of 6 columns (id bigint key, name text, active bool, price float8, note NULL,
updated_at timestamptz text), a table of --rows rows, then --entries changes (40% INSERT, 40% UPDATE with the
previous row as old values, 20% DELETE) in transactions of 10 sharing a commit LSN. Each scenario feeds the
same messages to fresh clients through SyncStream.handle_bytes (what a stream does with each message gRPC
read) and prints CPU µs per applied entry and entries/s: process time, summed over segments of SEGMENT
messages, each segment's best of --repeat runs (so bursts of other load on the machine count little):
  unbatched            one entry per message (max_batch_size 0)
  batched              --batch entries per JournalEntryBatch message
  batched, N clients   N clients of one process applying the same messages in turn (they share decoded rows)
and the snapshot install (µs per row, batched). Usage: .venv/bin/python bench/client_apply.py [--entries 50000]
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: another library version
sys.path.append(str(Path(__file__).resolve().parent.parent / "services" / "fanout" / "src"))

from laredo.replication.v1 import replication_pb2 as pb  # noqa: E402
from laredo_client.client_replica import ClientReplica  # noqa: E402
from laredo_client.options import ClientOptions  # noqa: E402
from laredo_client.stats import ClientStats  # noqa: E402
from laredo_client.sync_stream import SyncStream  # noqa: E402
from laredo_fanout.adapters import protobuf_wire  # noqa: E402
from laredo_fanout.adapters.protobuf_wire import varint  # noqa: E402
from laredo_kernel.struct_wire import struct_fields  # noqa: E402

COLUMNS = (("id", "int8", 1), ("name", "text", 0), ("active", "bool", 0), ("price", "float8", 0),
           ("note", "text", 0), ("updated_at", "timestamptz", 0))
CHANGES_PER_TXN = 10
_ENTRY, _BATCH, _ROWS = b"\x2a", b"\xaa\x06", b"\xa2\x06"  # SyncResponse fields 5, 101 and 100
_OLD, _NEW = b"\x2a", b"\x32"  # ReplicationJournalEntry fields 5 and 6


def make_row(key: int, rnd: random.Random) -> dict[str, Any]:
    stamp = f"2026-11-22 10:{rnd.randrange(60):02d}:{rnd.randrange(60):02d}.{rnd.randrange(10**6):06d}+00"
    return {"id": key, "name": f"item {key} {rnd.choice(('red', 'green', 'blue'))}", "active": rnd.random() < 0.5,
            "price": round(rnd.uniform(1, 1000), 2), "note": None, "updated_at": stamp}


def framed(tag: bytes, payload: bytes) -> bytes:
    return tag + varint(len(payload)) + payload


def entry_head(sequence: int, action: str) -> bytes:
    """ReplicationJournalEntry fields 1-4 and xid as the fan-out writes them, for transactions of 10 changes."""
    txn, ordinal = divmod(sequence - 1, CHANGES_PER_TXN)
    return protobuf_wire.journal_entry_head(sequence=sequence, position=f"0/{0x1000000 + txn * 0x100:X}:{ordinal + 1}",
                                            seconds=1_795_000_000 + txn, nanos=0, action=action, xid=5000 + txn)


def journal(rows: int, entries: int, seed: int = 7) -> tuple[list[bytes], list[bytes]]:
    """The initial rows' Struct bytes and the journal entries' ReplicationJournalEntry bytes."""
    rnd = random.Random(seed)
    live = {key: struct_fields(make_row(key, rnd)) for key in range(1, rows + 1)}
    initial = list(live.values())
    keys, next_key, encoded = list(live), rows + 1, []
    for sequence in range(1, entries + 1):
        op = rnd.random()
        if op < 0.4 or len(keys) < 100:
            live[next_key] = new = struct_fields(make_row(next_key, rnd))
            keys.append(next_key)
            next_key += 1
            body = entry_head(sequence, "INSERT") + framed(_NEW, new)
        elif op < 0.8:
            key = rnd.choice(keys)
            old, live[key] = live[key], struct_fields(make_row(key, rnd))
            body = entry_head(sequence, "UPDATE") + framed(_OLD, old) + framed(_NEW, live[key])
        else:
            key = keys.pop(rnd.randrange(len(keys)))
            body = entry_head(sequence, "DELETE") + framed(_OLD, live.pop(key))
        encoded.append(body)
    return initial, encoded


def messages(entries: list[bytes], batch: int) -> list[bytes]:
    if batch <= 1:
        return [framed(_ENTRY, e) for e in entries]
    return [framed(_BATCH, b"".join(framed(b"\x0a", e) for e in entries[i:i + batch]))
            for i in range(0, len(entries), batch)]


def snapshot_messages(rows: list[bytes], batch: int, sequence: int) -> list[bytes]:
    begin = pb.SyncResponse(snapshot_begin=pb.SnapshotBegin(snapshot_id="bench", sequence=sequence,
                                                            row_count=len(rows), source_position="0/FFFFFF"))
    end = pb.SyncResponse(snapshot_end=pb.SnapshotEnd(sequence=sequence, rows_sent=len(rows),
                                                      source_position="0/FFFFFF"))
    body = [framed(_ROWS, b"".join(framed(b"\x0a", framed(b"\x0a", r)) for r in rows[i:i + batch]))
            for i in range(0, len(rows), batch)]
    return [begin.SerializeToString(), *body, end.SerializeToString()]


def new_stream(mode: int, current: int) -> SyncStream:
    options = ClientOptions(address="bench:1", schema="public", table="bench_items")
    stream = SyncStream(options, ClientReplica(), pb.SyncRequest(), name="bench", stats=ClientStats(),
                        on_caught_up=lambda _: None, primary=True)
    columns = [pb.ColumnDefinition(ordinal_position=i, column_name=name, data_type=kind,
                                   is_primary_key=key > 0, primary_key_ordinal=key)
               for i, (name, kind, key) in enumerate(COLUMNS, start=1)]
    stream.handle(pb.SyncResponse(handshake=pb.SyncHandshake(mode=mode, server_current_sequence=current,
                                                             columns=columns)))
    return stream


def applier(stream: SyncStream) -> Callable[[bytes], None]:
    """What the stream does with a message's bytes. Library versions before handle_bytes had gRPC parse each
    message and handed it to handle(): measuring such a version (PYTHONPATH) counts that parse too."""
    handle_bytes = getattr(stream, "handle_bytes", None)
    if handle_bytes is not None:
        return handle_bytes  # type: ignore[no-any-return]
    return lambda data: stream.handle(pb.SyncResponse.FromString(data))


def clients(count: int, snapshot: list[bytes]) -> Iterator[SyncStream]:
    for _ in range(count):
        stream = new_stream(pb.SYNC_MODE_FULL_SNAPSHOT, 0)
        apply = applier(stream)
        for message in snapshot:
            apply(message)
        yield stream


SEGMENT = 20  # messages timed together; each segment's best run counts, so a burst of other load is dropped


def timed(streams: list[SyncStream], batches: list[bytes]) -> list[float]:
    """CPU seconds of each segment of SEGMENT messages, applied by every stream in turn."""
    times = []
    clock = time.process_time
    appliers = [applier(stream) for stream in streams]
    for first in range(0, len(batches), SEGMENT):
        started = clock()
        for message in batches[first:first + SEGMENT]:
            for apply in appliers:
                apply(message)
        times.append(clock() - started)
    return times


def best_of(runs: list[list[float]]) -> float:
    """The sum over segments of each segment's fastest run: every segment does the same work in every run."""
    return sum(min(segment) for segment in zip(*runs, strict=True))


def per_entry(snapshot: list[bytes], batches: list[bytes], entries: int, count: int, repeat: int) -> float:
    """CPU seconds per entry each of `count` clients of one process applies (best of `repeat` runs)."""
    runs = []
    for _ in range(repeat):
        streams = list(clients(count, snapshot))
        runs.append(timed(streams, batches))
        applied = sum(s.stats.entries_applied for s in streams)
        assert applied == entries * count, f"applied {applied} of {entries * count} entries"
        del streams  # and with them the rows their decoder shares: the next run starts cold
        gc.collect()
    return best_of(runs) / (entries * count)


def shared_clients_cost(count: int = 25, rows: int = 2_000, entries: int = 5_000, batch: int = 100) -> float:
    """CPU seconds per entry per client for `count` batched clients in one process: what each process of
    clients needs per entry written to the table (tests/e2e/test_rolling_restart.py sizes its load by it)."""
    initial, changes = journal(rows, entries)
    return per_entry(snapshot_messages(initial, batch, 0), messages(changes, batch), entries, count, 2)


def scenario(name: str, snapshot: list[bytes], batches: list[bytes], entries: int, count: int, repeat: int) -> None:
    cost = per_entry(snapshot, batches, entries, count, repeat)
    print(f"{name:<28} {cost * 1e6:6.2f} µs/entry  {1 / cost:>10,.0f} entries/s")


def snapshot_install(rows: list[bytes], batch: int, repeat: int) -> None:
    runs = []
    for _ in range(repeat):
        stream = new_stream(pb.SYNC_MODE_FULL_SNAPSHOT, 0)
        runs.append(timed([stream], snapshot_messages(rows, batch, 0)))
        assert len(stream.replica.rows) == len(rows)
        del stream
        gc.collect()
    per_row = best_of(runs) / len(rows)
    print(f"{'snapshot install, batched':<28} {per_row * 1e6:6.2f} µs/row    {1 / per_row:>10,.0f} rows/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000, help="rows before the journal (default 10000)")
    parser.add_argument("--entries", type=int, default=50_000, help="journal entries (default 50000)")
    parser.add_argument("--batch", type=int, default=100, help="entries per batched message (default 100)")
    parser.add_argument("--clients", type=int, default=25, help="clients in the shared-process scenario")
    parser.add_argument("--repeat", type=int, default=5, help="runs per scenario; the best counts (default 5)")
    args = parser.parse_args()
    initial, entries = journal(args.rows, args.entries)
    snapshot = snapshot_messages(initial, args.batch, 0)
    print(f"{args.rows} rows of {len(COLUMNS)} columns, {args.entries} entries (40% INSERT, 40% UPDATE, "
          f"20% DELETE); python {sys.version.split()[0]}")
    scenario("unbatched", snapshot, messages(entries, 1), args.entries, 1, args.repeat)
    scenario(f"batched ({args.batch}/message)", snapshot, messages(entries, args.batch), args.entries, 1, args.repeat)
    scenario(f"batched, {args.clients} clients", snapshot, messages(entries, args.batch), args.entries,
             args.clients, max(2, args.repeat // 2))
    snapshot_install(initial, args.batch, args.repeat)


if __name__ == "__main__":
    main()

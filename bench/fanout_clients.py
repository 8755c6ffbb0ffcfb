"""Lightweight Sync readers for bench/fanout.py, in their own process so the fan-out process is measured alone.

Each stream parses its messages (protobuf in C), counts snapshot rows and journal entries, and notes the time
its last expected entry arrived; with --latency it also notes now - entry.timestamp for every entry. Journal
entries and snapshot batches are read only as far as that needs (an entry's sequence and commit time, a row's
bytes): the readers share the machine with the fan-out, and parsing every row's values would measure them
instead. Output: JSON lines on stdout: {"event": "live"} once every stream passed its handshake (and snapshot), then
{"event": "done", ...} with the counts, the finish time and latency percentiles.
Usage (by bench/fanout.py): fanout_clients.py --address 127.0.0.1:4002 --clients 100 --batch 0 --until 5000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

import grpc

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from laredo.replication.v1 import replication_pb2 as pb

METHOD = "/laredo.replication.v1.TableSyncReplication/Sync"
STREAMS_PER_CONNECTION = 50


def _skim_type() -> type:
    """SyncResponse as far as journal entries and snapshot batches go: an entry's sequence and commit time, a row
    as its bytes; everything else (the rows' values above all) stays unread."""
    field = descriptor_pb2.FieldDescriptorProto

    def add(message: descriptor_pb2.DescriptorProto, name: str, number: int, kind: int, type_name: str = "",
            repeated: bool = False) -> None:
        added = message.field.add(name=name, number=number, type=kind,
                                  label=field.LABEL_REPEATED if repeated else field.LABEL_OPTIONAL)
        if type_name:
            added.type_name = type_name

    proto = descriptor_pb2.FileDescriptorProto(name="bench_skim.proto", package="benchskim", syntax="proto3")
    stamp, entry, entries, rows, skim = (proto.message_type.add(name=name) for name in
                                         ("Stamp", "Entry", "Entries", "Rows", "Skim"))
    add(stamp, "seconds", 1, field.TYPE_INT64)
    add(stamp, "nanos", 2, field.TYPE_INT32)
    add(entry, "sequence", 1, field.TYPE_INT64)
    add(entry, "timestamp", 3, field.TYPE_MESSAGE, ".benchskim.Stamp")
    add(entries, "entries", 1, field.TYPE_MESSAGE, ".benchskim.Entry", repeated=True)
    add(rows, "rows", 1, field.TYPE_BYTES, repeated=True)
    add(skim, "journal_entry", 5, field.TYPE_MESSAGE, ".benchskim.Entry")
    add(skim, "snapshot_rows", 100, field.TYPE_MESSAGE, ".benchskim.Rows")
    add(skim, "journal_batch", 101, field.TYPE_MESSAGE, ".benchskim.Entries")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("benchskim.Skim"))


SKIM = _skim_type()


class Reader:
    def __init__(self, until: int, latency: bool) -> None:
        self.until = until
        self.latency = latency
        self.entries = 0
        self.messages = 0
        self.bytes = 0
        self.rows = 0
        self.last_sequence = 0
        self.live = asyncio.Event()
        self.done = asyncio.Event()
        self.started_at = 0.0
        self.snapshot_at = 0.0
        self.finished_at = 0.0
        self.latencies: list[float] = []

    def entry(self, entry: Any, now: float) -> None:
        self.entries += 1
        self.last_sequence = entry.sequence
        if self.latency:
            self.latencies.append(now - (entry.timestamp.seconds + entry.timestamp.nanos / 1e9))

    def message(self, data: bytes) -> None:
        skim = SKIM.FromString(data)
        self.messages += 1
        self.bytes += len(data)
        now = time.time()
        if skim.HasField("journal_batch") or skim.HasField("journal_entry"):
            entries = skim.journal_batch.entries if skim.HasField("journal_batch") else (skim.journal_entry,)
            if self.latency:
                for entry in entries:
                    self.entry(entry, now)
            elif entries:
                self.entries += len(entries)
                self.last_sequence = entries[-1].sequence
            self.check(now)
            return
        if skim.HasField("snapshot_rows"):
            self.rows += len(skim.snapshot_rows.rows)
            return
        message = pb.SyncResponse.FromString(data)
        which = message.WhichOneof("message")
        if which == "snapshot_row":
            self.rows += 1
        elif which == "snapshot_end":
            self.snapshot_at = now
            self.last_sequence = message.snapshot_end.sequence
            self.live.set()
        elif which == "handshake" and message.handshake.mode != pb.SYNC_MODE_FULL_SNAPSHOT:
            self.last_sequence = message.handshake.resume_from_sequence
            self.live.set()
        self.check(now)

    def check(self, now: float) -> None:
        if self.last_sequence >= self.until and not self.done.is_set():
            self.finished_at = now
            self.done.set()


async def read(channel: grpc.aio.Channel, reader: Reader, request: pb.SyncRequest) -> None:
    call = channel.unary_stream(METHOD, request_serializer=pb.SyncRequest.SerializeToString,
                                response_deserializer=lambda data: data)(request)
    reader.started_at = time.time()
    async for data in call:
        reader.message(data)
        if reader.done.is_set():
            call.cancel()
            return
    raise RuntimeError(f"the stream ended at sequence {reader.last_sequence}, before {reader.until}")


async def until_all(readers: list[Reader], event: str, tasks: list[asyncio.Task[None]]) -> None:
    """Wait until every reader has set `event`; a stream that fails first ends the process with an error event
    (so the benchmark stops and says why instead of waiting for ever)."""
    waiting = asyncio.ensure_future(asyncio.gather(*(getattr(r, event).wait() for r in readers)))
    await asyncio.wait([waiting, *tasks], return_when=asyncio.FIRST_COMPLETED)
    failed = [t for t in tasks if t.done() and not t.cancelled() and t.exception() is not None]
    if failed and not waiting.done():
        waiting.cancel()
        error = failed[0].exception()
        print(json.dumps({"event": "error", "waiting_for": event, "failed_streams": len(failed),
                          "error": f"{type(error).__name__}: {error}"}), flush=True)
        sys.exit(1)
    await waiting


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] if ordered else 0.0


async def journal_identity(channel: grpc.aio.Channel, args: argparse.Namespace) -> tuple[str, str]:
    """The instance and journal epoch that number the server's sequences: a resuming client must name them, or
    the server ignores its last_known_sequence (sequences are local to one instance's journal)."""
    call = channel.unary_stream(METHOD, request_serializer=pb.SyncRequest.SerializeToString,
                                response_deserializer=pb.SyncResponse.FromString)(pb.SyncRequest(
                                    schema=args.schema, table=args.table, client_id="bench-identify",
                                    identify_instance=True))
    handshake = (await call.read()).handshake
    call.cancel()
    return handshake.instance_id, handshake.journal_epoch


async def run(args: argparse.Namespace) -> None:
    connections = max(1, -(-args.clients // STREAMS_PER_CONNECTION))
    channels = [grpc.aio.insecure_channel(args.address, options=[("grpc.use_local_subchannel_pool", 1)])
                for _ in range(connections)]
    instance_id, epoch = await journal_identity(channels[0], args) if args.since else ("", "")
    readers = [Reader(args.until, args.latency) for _ in range(args.clients)]
    tasks = [asyncio.create_task(read(channels[i % connections], reader, pb.SyncRequest(
        schema=args.schema, table=args.table, client_id=f"bench-{i}", last_known_sequence=args.since,
        last_known_instance_id=instance_id, last_known_journal_epoch=epoch,
        max_batch_size=args.batch))) for i, reader in enumerate(readers)]
    await until_all(readers, "live", tasks)
    print(json.dumps({"event": "live"}), flush=True)
    await until_all(readers, "done", tasks)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    latencies = [x for r in readers for x in r.latencies]
    print(json.dumps({
        "event": "done", "finished_at": max(r.finished_at for r in readers),
        "entries": sum(r.entries for r in readers), "messages": sum(r.messages for r in readers),
        "bytes": sum(r.bytes for r in readers),
        "rows": sum(r.rows for r in readers),
        "snapshot_seconds": max(r.snapshot_at - r.started_at for r in readers) if args.since == 0 else 0.0,
        "latency_ms": {"count": len(latencies), **{f"p{p}": percentile(latencies, p) * 1000 for p in (50, 90, 99)},
                       "max": max(latencies, default=0.0) * 1000},
        **({"latencies_ms": [round(x * 1000, 3) for x in latencies]} if args.raw_latencies else {}),
    }), flush=True)
    for channel in channels:
        await channel.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", required=True)
    parser.add_argument("--schema", default="public")
    parser.add_argument("--table", default="bench_items")
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--batch", type=int, default=0, help="max_batch_size (0: one entry per message)")
    parser.add_argument("--since", type=int, default=0, help="last_known_sequence (0: full snapshot)")
    parser.add_argument("--until", type=int, required=True, help="stop once this sequence arrived")
    parser.add_argument("--latency", action="store_true")
    parser.add_argument("--raw-latencies", action="store_true",
                        help="also every latency (ms) in the done event, so that several processes can be merged")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())

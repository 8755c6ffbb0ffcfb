"""A worker process holding many LaredoClients of one table, driven over stdin/stdout with JSON lines.

Run as `python -m tests.e2e.client_swarm --address HOST:PORT --schema S --table T --clients N --name P`.
It prints `{"ready": true, ...}` once every client is ready (or `{"ready": false, "error": ...}`), then answers
each stdin line: `report` -> one JSON line with per-client row hash and counters; `stop` -> stops and exits.
Rows are hashed with `rows_hash`, which the test applies to `SELECT` results the same way; a client's hash is
null until it applied nothing between two reports (see SettledHashes).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from laredo_client import BackoffPolicy, LaredoClient
from laredo_client.options import DEFAULT_MAX_BATCH_SIZE

COLUMNS = ("id", "name", "qty", "note")
READY_TIMEOUT = 120.0


def rows_hash(rows: Iterable[Sequence[Any]]) -> str:
    """sha256 of the repr of the rows (tuples in COLUMNS order) sorted by primary key."""
    return hashlib.sha256(repr(sorted(tuple(r) for r in rows)).encode()).hexdigest()


def client_rows(rows: Iterable[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    return [tuple(row.get(c) for c in COLUMNS) for row in rows]


class SettledHashes:
    """Row hashes, computed only for clients that applied nothing since the previous report: hashing every
    replica on every report would take the CPU the clients need to catch up. A client still applying reports
    None, which equals no table hash."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[tuple[Any, ...], str | None]] = {}

    def of(self, name: str, client: LaredoClient) -> str | None:
        stats = client.stats
        mark = (client.last_source_position, stats.entries_applied, stats.entries_skipped, stats.full_snapshots,
                client.count())
        previous = self._last.get(name)
        if previous is None or previous[0] != mark:
            self._last[name] = (mark, None)
            return None
        if previous[1] is None:
            self._last[name] = (mark, rows_hash(client_rows(client.all())))
        return self._last[name][1]


def describe(name: str, client: LaredoClient, hashes: SettledHashes) -> dict[str, Any]:
    stats = client.stats
    return {
        "client": name, "hash": hashes.of(name, client), "rows": client.count(),
        "position": client.last_source_position, "ready": client.ready, "status": client.status,
        "failure": str(client.failure) if client.failure else None,
        "full_resyncs": stats.full_resyncs, "full_snapshots": stats.full_snapshots, "handoffs": stats.handoffs,
        "reconnects": stats.reconnects, "streams_opened": stats.streams_opened, "modes": stats.modes[-8:],
        "entries_applied": stats.entries_applied, "entries_skipped": stats.entries_skipped,
        "sequence_gaps": stats.sequence_gaps, "silent_streams": stats.silent_streams,
    }


def emit(message: Mapping[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


async def serve(args: argparse.Namespace) -> None:
    backoff = BackoffPolicy(initial=0.05, maximum=1.0, jitter=0.5)
    names = [f"{args.name}-{i}" for i in range(args.clients)]
    clients = {name: LaredoClient(args.address, args.schema, args.table, client_id=name,
                                  max_batch_size=args.max_batch_size, backoff=backoff) for name in names}
    hashes = SettledHashes()
    started = time.monotonic()
    for client in clients.values():
        await client.start()
    try:
        await asyncio.gather(*(c.await_ready(READY_TIMEOUT) for c in clients.values()))
        emit({"ready": True, "seconds": round(time.monotonic() - started, 2)})
    except Exception as exc:  # noqa: BLE001 - reported to the driving test, which fails with it
        emit({"ready": False, "error": f"{type(exc).__name__}: {exc}",
              "clients": [describe(n, c, hashes) for n, c in clients.items()]})
    try:
        while line := (await asyncio.to_thread(sys.stdin.readline)).strip():
            if line == "report":
                emit({"clients": [describe(n, c, hashes) for n, c in clients.items()]})
            elif line == "stop":
                break
    finally:
        await asyncio.gather(*(c.stop() for c in clients.values()))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--address", required=True)
    parser.add_argument("--schema", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--clients", type=int, default=25)
    parser.add_argument("--name", default="swarm")
    parser.add_argument("--max-batch-size", type=int, default=DEFAULT_MAX_BATCH_SIZE)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format=f"%(asctime)s {args.name} %(levelname)s %(name)s: %(message)s")
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()

"""Live demo: PostgreSQL changes stream through ingest, JetStream and fan-out to the client library's replica.

Starts a throwaway PostgreSQL (wal_level=logical) and NATS JetStream on free loopback ports, creates a
table, runs `laredo-ingest` and `laredo-fanout` as processes, writes changes to PostgreSQL and prints
every change as the client receives it. Ends after --seconds (0 = until Ctrl-C) with a consistency check.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from laredo_client import LaredoClient  # noqa: E402
from laredo_kernel.jsonvalue import row_to_json  # noqa: E402
from laredo_testing.servers import NatsServer, PostgresServer  # noqa: E402
from tests.e2e.harness import ServiceProcess, free_port, write_config  # noqa: E402

TABLE = "public.demo_items"


def writer(dsn: str, stop_at: float, rate: float) -> int:
    """Insert, update and delete rows at about `rate` transactions per second."""
    rnd, written, next_id = random.Random(), 0, 1001
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < stop_at:
            op = rnd.random()
            if op < 0.5:
                conn.execute(f"INSERT INTO {TABLE} (id, name, price) VALUES (%s, %s, %s)",
                             (next_id, f"item {next_id}", round(rnd.uniform(1, 100), 2)))
                next_id += 1
            elif op < 0.85:
                conn.execute(f"UPDATE {TABLE} SET price = price + 1 WHERE id = "
                             f"(SELECT id FROM {TABLE} ORDER BY random() LIMIT 1)")
            else:
                conn.execute(f"DELETE FROM {TABLE} WHERE id = (SELECT id FROM {TABLE} ORDER BY random() LIMIT 1)")
            written += 1
            time.sleep(1.0 / rate)  # the demo's write pace
    return written


async def run_client(port: int, stop_at: float) -> dict[int, dict]:
    """The client library's live replica of the table, printing each change; its rows at the end."""
    async with LaredoClient(f"127.0.0.1:{port}", "public", "demo_items", client_id="demo") as client:

        def print_change(old: dict | None, new: dict | None) -> None:
            action = "INSERT" if old is None else "DELETE" if new is None else "UPDATE"
            print(f"  {client.last_source_position:<18} {action:<8} {new if new is not None else old}", flush=True)

        await client.await_ready(60)
        print(f"client ready: full snapshot of {client.count()} rows, now streaming live changes", flush=True)
        client.listen(print_change)
        await asyncio.sleep(max(0.0, stop_at - time.monotonic()))
        await asyncio.sleep(1.0)  # let the last changes arrive before the check
        if client.failure is not None:
            raise client.failure
        return {int(row["id"]): row for row in client.all()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="how long to stream (0 = until Ctrl-C)")
    parser.add_argument("--rate", type=float, default=5.0, help="write transactions per second")
    args = parser.parse_args()
    seconds = args.seconds or 10**9
    run_dir = Path(tempfile.mkdtemp(prefix="laredo-demo-"))
    run_dir.chmod(0o755)
    with PostgresServer() as pg, NatsServer() as nats:
        print(f"PostgreSQL {pg.dsn}\nNATS       {nats.url}\nlogs       {run_dir}", flush=True)
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            conn.execute(f"CREATE TABLE {TABLE} (id bigint PRIMARY KEY, name text NOT NULL, price numeric(10,2))")
            conn.execute(f"INSERT INTO {TABLE} SELECT g, 'item ' || g, g * 1.5 FROM generate_series(1, 1000) g")
        fanout_port, health = free_port(), {"ingest": free_port(), "fanout": free_port()}
        config = write_config(run_dir / "laredo.conf", pg_dsn=pg.dsn, nats_url=nats.url, source_id="demo",
                              slot="laredo_demo", prefix="laredo", tables=[TABLE], fanout_port=fanout_port,
                              health_ports=health)
        services = [ServiceProcess(name, config, health[name], run_dir / f"{name}.log")
                    for name in ("ingest", "fanout")]
        try:
            for service in services:
                service.start()
            for service in services:
                service.wait_ready()
            print(f"ingest and fan-out ready; fan-out gRPC on 127.0.0.1:{fanout_port}", flush=True)
            stop_at = time.monotonic() + seconds
            loop_writer = asyncio.to_thread(writer, pg.dsn, stop_at, args.rate)

            async def both() -> tuple[int, dict[int, dict]]:
                return await asyncio.gather(loop_writer, run_client(fanout_port, stop_at))

            try:
                written, held = asyncio.run(both())
            except KeyboardInterrupt:
                return 0
            with psycopg.connect(pg.dsn, options="-c TimeZone=UTC") as conn:
                cur = conn.execute(f"SELECT * FROM {TABLE}")
                names = [d.name for d in cur.description]
                expected = {r[0]: row_to_json(dict(zip(names, r))) for r in cur}
            same = held == expected
            print(f"\n{written} write transactions; client holds {len(held)} rows, table has "
                  f"{len(expected)}: {'replica equals the table' if same else 'MISMATCH'}", flush=True)
            return 0 if same else 1
        finally:
            for service in reversed(services):
                service.stop()


if __name__ == "__main__":
    sys.exit(main())

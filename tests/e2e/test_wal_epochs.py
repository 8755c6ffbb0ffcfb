"""The source's WAL goes backwards under running consumers: a base backup taken earlier is restored.

PostgreSQL is restored from a base backup taken while the system ran, after which more changes were made and
consumed. The restored server's WAL is behind positions the stream already holds, and its replication slot is
gone (base backups carry no slots). Ingest must notice, take a new baseline in the next epoch, and every
consumer — fan-out with a connected client, and query — must apply it although its positions are lower, and
then the changes made on the restored server, whose positions repeat earlier ones.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from laredo_kernel.changes import TableId
from laredo_kernel.position import parse_lsn
from laredo_testing.eventually import eventually
from laredo_testing.postgres import PG_BIN_DIR, PostgresServer

from tests.e2e.harness import create_table
from tests.e2e.system import connected_replica, everyone_equals_the_table, running_system

pytestmark = pytest.mark.integration

TABLE = TableId("public", "epoch_items")


@pytest.fixture
def restorable_pg() -> Iterator[PostgresServer]:
    with PostgresServer({"max_wal_senders": 10}) as server:
        yield server


def take_base_backup(pg: PostgresServer) -> Path:
    target = pg.run_dir / "backup"
    subprocess.run(["runuser", "-u", "postgres", "--", str(PG_BIN_DIR / "pg_basebackup"), "-h", pg.host,
                    "-p", str(pg.port), "-U", pg.user, "-D", str(target), "-X", "stream", "-c", "fast"],
                   check=True, capture_output=True, timeout=120)
    return target


def restore_base_backup(pg: PostgresServer, backup: Path) -> None:
    pg.stop("fast")
    shutil.move(pg.data_dir, pg.run_dir / "data-before-restore")
    shutil.move(backup, pg.data_dir)
    pg.start()


def wal_lsn(dsn: str) -> str:
    with psycopg.connect(dsn) as conn:
        return str(conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0])


async def test_a_restored_base_backup_starts_a_new_epoch_that_every_consumer_applies(
        restorable_pg: PostgresServer, nats_url: str, unique_name: str, tmp_path: Path) -> None:
    dsn = restorable_pg.create_database(unique_name)
    create_table(dsn, str(TABLE), 200)
    with running_system(dsn, nats_url, unique_name, TABLE, tmp_path) as system:
        async with connected_replica(system, "through-the-restore") as replica:
            await eventually(lambda: everyone_equals_the_table(system, replica), timeout=60,
                             what="everyone equal to the table")
            backup = take_base_backup(restorable_pg)
            # After the backup: changes that the restore takes back, and enough WAL that the restored server's
            # next positions fall below the ones the stream holds.
            system.sql(f"DELETE FROM {TABLE} WHERE id <= 50")
            system.sql(f"UPDATE {TABLE} SET name = 'after the backup' WHERE id > 150")
            system.sql(f"INSERT INTO {TABLE} (id, name, qty) SELECT i, 'gone after the restore', i "
                       "FROM generate_series(1001, 3000) i")
            await eventually(lambda: everyone_equals_the_table(system, replica), timeout=60,
                             what="the changes made after the backup everywhere")
            before_restore = wal_lsn(dsn)

            system.services["ingest"].stop()
            restore_base_backup(restorable_pg, backup)
            assert parse_lsn(wal_lsn(dsn)) < parse_lsn(before_restore), "the restored WAL is behind the stream"
            system.sql(f"UPDATE {TABLE} SET name = 'on the restored server' WHERE id BETWEEN 60 AND 70")
            system.services["ingest"].start()
            system.services["ingest"].wait_ready(90)
            await eventually(lambda: everyone_equals_the_table(system, replica), timeout=90,
                             what="the restored table everywhere (the new epoch applied)")
            replica.check()  # no gap, its first stream still open

            system.sql(f"INSERT INTO {TABLE} (id, name, qty) SELECT i, 'after the restore', i "
                       "FROM generate_series(5001, 5100) i")  # positions the stream held before the restore
            await eventually(lambda: everyone_equals_the_table(system, replica), timeout=60,
                             what="changes made on the restored server everywhere")
            log = system.services["ingest"].log_tail(400)
            assert "new epoch" in log or "starts epoch 1" in log, log

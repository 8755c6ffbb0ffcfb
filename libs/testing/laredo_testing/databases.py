"""Per-test PostgreSQL databases: create one, and drop it together with its replication slots."""

from __future__ import annotations

import re

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from laredo_testing.eventually import wait_until

_DATABASE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def create_database(admin_dsn: str, name: str) -> str:
    """Create database `name` on the server behind `admin_dsn` and return the new database's DSN."""
    _check_database_name(name)
    with psycopg.connect(admin_dsn, autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return make_conninfo(admin_dsn, dbname=name)


def drop_database(admin_dsn: str, name: str, *, timeout: float = 15.0) -> None:
    """Drop database `name` and its logical slots, disconnecting whoever still uses them."""
    _check_database_name(name)
    wait_until(lambda: _drop_database_once(admin_dsn, name), timeout=timeout,
               what=f"database {name} and its replication slots to be dropped")


def _drop_database_once(admin_dsn: str, name: str) -> bool:
    # Leaked slots would pin WAL and use up max_replication_slots for the rest of the session.
    with psycopg.connect(admin_dsn, autocommit=True, connect_timeout=10) as conn:
        conn.execute("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots"
                     " WHERE database = %s AND active_pid IS NOT NULL", (name,))
        conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                     " WHERE database = %s AND NOT active", (name,))
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
    return True


def _check_database_name(name: str) -> None:
    if not _DATABASE_NAME.fullmatch(name):
        raise ValueError(f"database name {name!r} must match {_DATABASE_NAME.pattern}")

"""A throwaway PostgreSQL 15 cluster with logical replication, run with initdb and pg_ctl."""

from __future__ import annotations

import logging
import os
import pwd
import re
import shutil
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, Self

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from laredo_testing.eventually import wait_until
from laredo_testing.process import (START_ATTEMPTS, MissingExecutableError, ServerStartError, StartedInContext,
                                    free_port, make_run_dir, pid_alive, stop_pid, track, untrack)

logger = logging.getLogger(__name__)

PG_BIN_DIR = Path("/usr/lib/postgresql/15/bin")
PG_INSTALL_HINT = "apt-get install -y postgresql-15 postgresql-contrib"

# synchronous_commit stays on: walsenders only ship flushed WAL, so turning it off delays every
# change by wal_writer_delay (~200 ms) and makes "peek right after commit" tests flaky.
DEFAULT_SETTINGS: Mapping[str, str | int] = {
    "listen_addresses": "127.0.0.1",
    "wal_level": "logical",
    "max_replication_slots": 20,
    "max_wal_senders": 20,
    "fsync": "off",
    "full_page_writes": "off",
    "shared_buffers": "256MB",
    "max_wal_size": "2GB",
}

_DATABASE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
StopMode = Literal["smart", "fast", "immediate"]
STOP_SIGNALS: Mapping[str, signal.Signals] = {"smart": signal.SIGTERM, "fast": signal.SIGINT,
                                              "immediate": signal.SIGQUIT}


class PostgresCommon:
    """What the PostgreSQL test servers (processes and containers) build on their `dsn`, `stop` and `start`."""

    dsn: str

    def restart(self, mode: StopMode = "fast") -> None:
        self.stop(mode)  # type: ignore[attr-defined]
        self.start()  # type: ignore[attr-defined]

    def create_database(self, name: str) -> str:
        """Create an empty database and return its DSN."""
        _check_database_name(name)
        with psycopg.connect(self.dsn, autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return make_conninfo(self.dsn, dbname=name)

    def drop_database(self, name: str, *, timeout: float = 15.0) -> None:
        """Drop a database with its logical slots, disconnecting whoever still uses them."""
        _check_database_name(name)
        wait_until(lambda: self._drop_database_once(name), timeout=timeout,
                   what=f"database {name} and its replication slots to be dropped")

    def _drop_database_once(self, name: str) -> bool:
        # Leaked slots would pin WAL and use up max_replication_slots for the rest of the session.
        with psycopg.connect(self.dsn, autocommit=True, connect_timeout=10) as conn:
            conn.execute("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots"
                         " WHERE database = %s AND active_pid IS NOT NULL", (name,))
            conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                         " WHERE database = %s AND NOT active", (name,))
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        return True


def _check_database_name(name: str) -> None:
    if not _DATABASE_NAME.fullmatch(name):
        raise ValueError(f"database name {name!r} must match {_DATABASE_NAME.pattern}")


class PostgresServer(PostgresCommon, StartedInContext):
    """A PostgreSQL cluster in its own directory on a free 127.0.0.1 port, user `postgres`, trust auth.

    `settings` override DEFAULT_SETTINGS (e.g. wal_level=replica for negative tests). The port and
    data survive stop()/start()/restart(), so fault tests can take the server away and bring it back.
    """

    name = "postgres"
    host = "127.0.0.1"
    user = "postgres"

    def __init__(self, settings: Mapping[str, str | int] | None = None, *, run_dir: Path | None = None,
                 bin_dir: Path = PG_BIN_DIR, start_timeout: float = 30.0) -> None:
        self.settings: dict[str, str | int] = {**DEFAULT_SETTINGS, **(settings or {})}
        self.bin_dir = bin_dir
        self.start_timeout = start_timeout
        self.port = 0
        self._given_run_dir = run_dir
        self._run_dir = run_dir

    @property
    def run_dir(self) -> Path:
        if self._run_dir is None:
            self._run_dir = make_run_dir(self.name)
        return self._run_dir

    @property
    def data_dir(self) -> Path:
        return self.run_dir / "data"

    @property
    def log_path(self) -> Path:
        return self.run_dir / "server.log"

    @property
    def dsn(self) -> str:
        """DSN of the `postgres` maintenance database."""
        return self.dsn_for("postgres")

    def dsn_for(self, dbname: str) -> str:
        return f"host={self.host} port={self.port} user={self.user} dbname={dbname}"

    @property
    def pid(self) -> int | None:
        """PID of the running postmaster, read from postmaster.pid."""
        try:
            pid = int((self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
        except (FileNotFoundError, ValueError):
            return None
        return pid if pid_alive(pid) else None

    @property
    def running(self) -> bool:
        return self.pid is not None

    def start(self) -> Self:
        """Create the cluster on first use, then start it and wait until it accepts connections."""
        if self.running:
            return self
        self._ensure_cluster()
        first_start = self.port == 0
        attempts = START_ATTEMPTS if first_start else 1
        for attempt in range(1, attempts + 1):
            if first_start:
                self.port = free_port()
            self._write_settings()
            failure = self._pg_ctl_start()
            if failure is None:
                break
            # A port taken between probing and binding is the only failure worth a retry.
            if attempt == attempts or "already in use" not in failure:
                raise ServerStartError(f"PostgreSQL did not start on port {self.port}:\n{failure}")
            logger.info("port %d was taken, retrying PostgreSQL on another port", self.port)
        track(self)
        logger.info("postgres started (pid %s) on %s:%d", self.pid, self.host, self.port)
        return self

    def stop(self, mode: StopMode = "fast") -> None:
        """Stop the postmaster by PID: smart waits for clients, fast aborts them, immediate crashes."""
        pid = self.pid
        if pid is not None:
            stop_pid(pid, sig=STOP_SIGNALS[mode], timeout=30.0, what=f"postgres ({mode} stop)")

    def close(self) -> None:
        """Stop the server and delete the cluster this object created."""
        self.stop("immediate")
        untrack(self)
        if self._given_run_dir is None and self._run_dir is not None:
            shutil.rmtree(self._run_dir, ignore_errors=True)
            self._run_dir = None
            self.port = 0

    def _ensure_cluster(self) -> None:
        if (self.data_dir / "PG_VERSION").exists():
            return
        initdb = self._executable("initdb")
        if os.geteuid() == 0:  # the server runs as postgres and puts its socket and log in the run directory
            _check_traversable(self.run_dir)
            shutil.chown(self.run_dir, "postgres", "postgres")
        self._run([initdb, "-D", str(self.data_dir), "-U", self.user, "--auth=trust", "-E", "UTF8",
                   "--locale=C.UTF-8", "--no-sync"], what="initdb")
        with (self.data_dir / "postgresql.conf").open("a") as conf:
            conf.write("\ninclude 'laredo.conf'\n")

    def _write_settings(self) -> None:
        values = {**self.settings, "port": self.port, "unix_socket_directories": str(self.run_dir)}
        lines = [f"{key} = '{str(value).replace(chr(39), chr(39) * 2)}'" for key, value in values.items()]
        (self.data_dir / "laredo.conf").write_text("\n".join(lines) + "\n")

    def _pg_ctl_start(self) -> str | None:
        """Start via pg_ctl; None on success, else the new part of the server log."""
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        pg_ctl = self._executable("pg_ctl")
        command = [pg_ctl, "-D", str(self.data_dir), "-l", str(self.log_path), "-w",
                   "-t", str(int(self.start_timeout)), "-s", "start"]
        try:
            self._run(command, what="pg_ctl start", timeout=self.start_timeout + 10)
        except ServerStartError as exc:
            self.stop("immediate")
            return f"{exc}\n--- server log ---\n{self._log_since(offset)}"
        return None

    def _log_since(self, offset: int) -> str:
        try:
            with self.log_path.open(errors="replace") as log:
                log.seek(offset)
                return log.read()[-4000:]
        except FileNotFoundError:
            return f"(no log at {self.log_path})"

    def _run(self, command: list[str], *, what: str, timeout: float = 120.0) -> None:
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        try:
            result = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
                                    cwd=self.run_dir)
        except subprocess.TimeoutExpired as exc:
            raise ServerStartError(f"{what} took longer than {timeout:g}s: {' '.join(command)}") from exc
        if result.returncode != 0:
            raise ServerStartError(f"{what} failed with exit code {result.returncode}: {' '.join(command)}\n"
                                   f"{result.stdout}{result.stderr}")

    def _executable(self, name: str) -> str:
        path = self.bin_dir / name
        if not os.access(path, os.X_OK):
            raise MissingExecutableError(f"{path} is missing; install it with: {PG_INSTALL_HINT}")
        if os.geteuid() == 0 and not _user_exists("postgres"):
            raise MissingExecutableError(f"the postgres user does not exist; install it with: {PG_INSTALL_HINT}")
        return str(path)


def _check_traversable(path: Path) -> None:
    """initdb runs as postgres, which needs search permission on every parent directory."""
    for parent in path.parents:
        if not parent.stat().st_mode & 0o001:
            raise ServerStartError(f"the postgres user cannot traverse {parent} (mode "
                                   f"{parent.stat().st_mode & 0o777:o}); chmod o+x it or set TMPDIR to a directory "
                                   "such as /tmp")


def _user_exists(user: str) -> bool:
    try:
        pwd.getpwnam(user)
    except KeyError:
        return False
    return True

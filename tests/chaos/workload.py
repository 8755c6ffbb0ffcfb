"""The chaos table and its seeded writer: small mixed transactions, plus planned big, aborted and TRUNCATE ones.

Small transactions (1-8 changes, paced to `rate` changes/s) mix inserts, updates that keep the TOASTed `doc`
column (PostgreSQL then sends it as "unchanged"), updates that replace it, primary-key changes (the TOASTed
value travels unchanged under a new key) and deletes. The events of the plan (a 20,000-row transaction, an
aborted one that PostgreSQL streams and then aborts, a TRUNCATE) run when the plan says. Every choice comes
from one `random.Random(seed)`: a seed writes the same sequence of statements; only where a fault breaks a
transaction (its connection lost) the writer re-reads the ids from the table and carries on with the next.
"""

from __future__ import annotations

import enum
import logging
import queue
import random
import threading
import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import psycopg

from laredo_kernel.jsonvalue import row_to_json

log = logging.getLogger(__name__)

COLUMNS = ("id", "grp", "qty", "doc", "blob", "updated_at")
INITIAL_ROWS = 1_000
BIG_ROWS = 20_000
DOC_CHARS = 3_000  # with STORAGE EXTERNAL, a row carrying this much is stored out of line (TOASTed)
MIN_ROWS = 500  # inserts are forced below this many rows


class Event(enum.Enum):
    """Planned workload events (the small transactions run all the time)."""

    BIG_INSERT = "a 20,000-row INSERT transaction"
    BIG_UPDATE = "a 20,000-row UPDATE transaction"
    ABORTED_BIG = "a 20,000-row transaction rolled back"
    TRUNCATE = "TRUNCATE"


def create_table(dsn: str, table: str, rnd: random.Random) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, grp int NOT NULL, qty numeric(12, 2), "
                     "doc text, blob bytea, updated_at timestamptz NOT NULL DEFAULT '2026-01-01 00:00:00+00')")
        conn.execute(f"ALTER TABLE {table} ALTER COLUMN doc SET STORAGE EXTERNAL")
        with conn.cursor() as cur:
            cur.executemany(f"INSERT INTO {table} (id, grp, qty, doc, blob) VALUES (%s, %s, %s, %s, %s)",
                            [(i, *_values(rnd, with_doc=i % 10 == 0)) for i in range(1, INITIAL_ROWS + 1)])


def table_rows(dsn: str, table: str) -> dict[int, dict[str, Any]]:
    """SELECT * with values as clients see them (laredo_kernel.jsonvalue), keyed by id."""
    with psycopg.connect(dsn, options="-c TimeZone=UTC", connect_timeout=10) as conn:
        cur = conn.execute(f"SELECT {', '.join(COLUMNS)} FROM {table}")
        return {r[0]: row_to_json(dict(zip(COLUMNS, r, strict=True))) for r in cur.fetchall()}


def _values(rnd: random.Random, *, with_doc: bool) -> tuple[int, Decimal, str | None, bytes | None]:
    doc = rnd.randbytes(DOC_CHARS // 2).hex() if with_doc else None
    blob = rnd.randbytes(rnd.randrange(1, 48)) if rnd.random() < 0.7 else None
    return rnd.randrange(100), Decimal(rnd.randrange(-10**6, 10**6)) / 100, doc, blob


@dataclass
class WriterStats:
    transactions: int = 0
    changes: int = 0
    broken: int = 0  # transactions a fault broke (connection lost); the writer re-read the ids
    events: list[tuple[float, str, str]] = field(default_factory=list)  # (t, event, outcome)


class Writer:
    """Writes from a thread until stopped; `run_event` queues a planned event for the thread to run next."""

    def __init__(self, dsn: str, table: str, seed: int, rate: float, clock: Any) -> None:
        self._dsn, self._table, self._rate, self._clock = dsn, table, rate, clock
        self._rnd = random.Random(seed)
        self._events: queue.SimpleQueue[Event] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._live: list[int] = []
        self._next_id = 0
        self._conn: psycopg.Connection | None = None
        self._paced = 0  # changes of small transactions, which follow the rate
        self.stats = WriterStats()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="chaos-writer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def run_event(self, event: Event) -> None:
        self._events.put(event)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)
        if self._thread.is_alive():
            raise AssertionError("the chaos writer did not stop within 120s")
        if self.error is not None:
            raise AssertionError(f"the chaos writer failed: {self.error!r}") from self.error

    def _run(self) -> None:
        try:
            started = time.monotonic()
            while not self._stop.is_set():
                self._one_transaction()
                ahead = self._paced / self._rate - (time.monotonic() - started)  # events are not paced
                if ahead > 0:
                    self._stop.wait(min(ahead, 1.0))  # pacing to the rate, not waiting for a condition
        except BaseException as exc:  # noqa: BLE001 - reported by stop()
            self.error = exc
        finally:
            self._drop_connection()

    def _one_transaction(self) -> None:
        try:
            event = self._events.get_nowait()
        except queue.Empty:
            event = None
        while True:
            try:
                conn = self._connection()
                if event is not None:
                    outcome = self._event(conn, event)
                    self.stats.events.append((self._clock(), event.value, outcome))
                else:
                    with conn.transaction():
                        count = self._small(conn)
                    self.stats.changes += count
                    self._paced += count
                self.stats.transactions += 1
                return
            except psycopg.OperationalError as exc:
                self.stats.broken += 1
                log.info("writer: transaction broken by %s; retrying with fresh ids", exc)
                self._drop_connection()
                if self._stop.wait(0.5):  # PostgreSQL is restarting: try again shortly
                    return

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self._dsn, autocommit=True, connect_timeout=5)
            self._reload(self._conn)  # a broken transaction may or may not have committed
        return self._conn

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _reload(self, conn: psycopg.Connection) -> None:
        self._live = [r[0] for r in conn.execute(f"SELECT id FROM {self._table} ORDER BY id")]
        top = conn.execute(f"SELECT coalesce(max(id), 0) FROM {self._table}").fetchone()
        self._next_id = max(int(top[0]) if top else 0, self._next_id) + 1

    def _small(self, conn: psycopg.Connection) -> int:
        rnd, table, live = self._rnd, self._table, self._live
        count = rnd.randint(1, 8)
        for _ in range(count):
            op = rnd.random()
            if op < 0.35 or len(live) < MIN_ROWS:
                conn.execute(f"INSERT INTO {table} (id, grp, qty, doc, blob) VALUES (%s, %s, %s, %s, %s)",
                             (self._next_id, *_values(rnd, with_doc=rnd.random() < 0.3)))
                live.append(self._next_id)
                self._next_id += 1
            elif op < 0.60:  # the TOASTed doc stays: it travels as "unchanged"
                grp, qty, _, blob = _values(rnd, with_doc=False)
                conn.execute(f"UPDATE {table} SET grp = %s, qty = %s, blob = %s, updated_at = now() WHERE id = %s",
                             (grp, qty, blob, rnd.choice(live)))
            elif op < 0.72:
                doc = _values(rnd, with_doc=rnd.random() < 0.9)[2]
                conn.execute(f"UPDATE {table} SET doc = %s WHERE id = %s", (doc, rnd.choice(live)))
            elif op < 0.78:  # a new primary key; doc unchanged
                index = rnd.randrange(len(live))
                conn.execute(f"UPDATE {table} SET id = %s WHERE id = %s", (self._next_id, live[index]))
                live[index] = self._next_id
                self._next_id += 1
            else:
                victim = live.pop(rnd.randrange(len(live)))
                conn.execute(f"DELETE FROM {table} WHERE id = %s", (victim,))
        return count

    def _event(self, conn: psycopg.Connection, event: Event) -> str:
        table, first = self._table, self._next_id
        grp = self._rnd.randrange(100)
        big_insert = (f"INSERT INTO {table} (id, grp, qty, blob) SELECT g, %s, g %% 1000, "
                      f"decode(md5(g::text), 'hex') FROM generate_series(%s::bigint, %s::bigint) g")
        if event is Event.BIG_INSERT:
            conn.execute(big_insert, (grp, first, first + BIG_ROWS - 1))
            self._live.extend(range(first, first + BIG_ROWS))
            self._next_id += BIG_ROWS
            self.stats.changes += BIG_ROWS
            return f"ids {first}..{first + BIG_ROWS - 1}"
        if event is Event.BIG_UPDATE:  # topped up to BIG_ROWS rows first, in the same transaction
            with conn.transaction():
                short = max(0, BIG_ROWS - len(self._live))
                if short:
                    conn.execute(big_insert, (grp, first, first + short - 1))
                    self._live.extend(range(first, first + short))
                    self._next_id += short
                done = conn.execute(f"UPDATE {table} SET grp = %s, qty = qty + 1 WHERE id IN "
                                    f"(SELECT id FROM {table} ORDER BY id LIMIT {BIG_ROWS})", (grp,)).rowcount
            self.stats.changes += short + done
            return f"{short} rows inserted, then {done} updated"
        if event is Event.ABORTED_BIG:
            with conn.transaction(force_rollback=True):
                conn.execute(big_insert, (grp, first, first + BIG_ROWS - 1))
            return f"ids {first}..{first + BIG_ROWS - 1} rolled back"
        conn.execute(f"TRUNCATE {table}")
        self._live.clear()
        self.stats.changes += 1
        return "table emptied"

"""ReplicationStream over a psycopg async walsender connection, driving libpq's COPY BOTH directly.

After START_REPLICATION psycopg has no API for the stream, so frames are read with PQgetCopyData in
non-blocking mode and the event loop waits on the socket (add_reader) in between: the loop stays free
for the NATS client and the feedback task. Frames are memoryviews that stay valid after later reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Sequence

import psycopg
from psycopg import pq

from laredo_kernel.position import format_lsn, parse_lsn

from laredo_ingest.adapters.pg_connection import connect, describe_dsn, wrap_errors
from laredo_ingest.domain.errors import IngestError, ReplicationInterrupted, SlotInUse, SlotLost
from laredo_ingest.domain.walproto import standby_status_update
from laredo_ingest.ports import CreatedSlot, SystemIdentity

_SLOT_NAME = re.compile(r"[a-z0-9_]{1,63}")
STOP_DRAIN_SECONDS = 5.0


class PsycopgReplicationStream:
    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._where = describe_dsn(dsn)
        self._conn: psycopg.AsyncConnection | None = None
        self._pg: pq.abc.PGconn | None = None  # set while streaming
        self._write_lock = asyncio.Lock()

    async def open(self) -> SystemIdentity:
        self._conn = await connect(self._dsn, replication="database")
        async with wrap_errors("IDENTIFY_SYSTEM", self._dsn):
            cur = await self._conn.execute("IDENTIFY_SYSTEM")
            system_id, _timeline, _xlogpos, dbname = await cur.fetchone()  # type: ignore[misc]
        return SystemIdentity(str(system_id), dbname or "")

    async def create_slot(self, name: str, *, temporary: bool) -> CreatedSlot:
        command = f"CREATE_REPLICATION_SLOT {_slot(name)} {'TEMPORARY ' if temporary else ''}" \
                  "LOGICAL pgoutput EXPORT_SNAPSHOT"
        try:
            cur = await self._c().execute(command)
            slot_name, consistent_point, snapshot_name, _plugin = await cur.fetchone()  # type: ignore[misc]
        except psycopg.errors.DuplicateObject as exc:
            raise SlotInUse(f"replication slot {name} on {self._where} already exists (another instance "
                            "created it a moment ago?)") from exc
        except psycopg.Error as exc:
            async with wrap_errors(f"creating replication slot {name}", self._dsn):
                raise exc
        return CreatedSlot(slot_name, parse_lsn(consistent_point), snapshot_name)

    async def start(self, slot: str, start_lsn: int, publication: str, *, protocol_version: int = 1,
                    streaming: bool = False) -> None:
        publication_names = '"' + publication.replace('"', '""') + '"'
        options = [f"proto_version '{int(protocol_version)}'",
                   "publication_names '" + publication_names.replace("'", "''") + "'", "messages 'true'"]
        if streaming:
            options.append("streaming 'on'")
        command = f"START_REPLICATION SLOT {_slot(slot)} LOGICAL {format_lsn(start_lsn)} ({', '.join(options)})"
        try:
            await self._c().execute(command)
        except psycopg.errors.ObjectInUse as exc:
            raise SlotInUse(f"replication slot {slot} on {self._where} is in use by another connection") from exc
        except (psycopg.errors.UndefinedObject, psycopg.errors.ObjectNotInPrerequisiteState) as exc:
            raise SlotLost(f"replication slot {slot} on {self._where} cannot be streamed: {exc}; the next start "
                           "recreates it and re-baselines") from exc
        except psycopg.OperationalError as exc:
            raise ReplicationInterrupted(f"START_REPLICATION on {self._where} failed: {exc}") from exc
        except psycopg.Error as exc:
            raise IngestError(f"START_REPLICATION of slot {slot} on {self._where} failed: {exc}") from exc
        self._pg = self._c().pgconn

    async def read_frames(self, max_frames: int) -> Sequence[bytes | memoryview]:
        pg = self._streaming()
        frames: list[bytes | memoryview] = []
        try:
            while True:
                size, data = pg.get_copy_data(1)
                if size > 0:
                    frames.append(data)
                    if len(frames) >= max_frames:
                        return frames
                elif size == 0:
                    if frames:
                        return frames
                    await self._wait(writable=False)
                    pg.consume_input()
                else:
                    reason = await self._end_reason(pg)
                    raise ReplicationInterrupted(f"the server ended the replication stream: {reason}")
        except psycopg.OperationalError as exc:
            raise ReplicationInterrupted(f"replication connection to {self._where} lost: {exc}") from exc

    async def send_status(self, write_lsn: int, flush_lsn: int, apply_lsn: int, *,
                          reply_requested: bool = False) -> None:
        message = standby_status_update(write_lsn, flush_lsn, apply_lsn, time.time_ns() // 1000,
                                        reply_requested=reply_requested)
        async with self._write_lock:
            pg = self._streaming()
            try:
                while pg.put_copy_data(message) == 0:
                    await self._wait(writable=True)
                while pg.flush() == 1:
                    await self._wait(writable=True)
            except psycopg.OperationalError as exc:
                raise ReplicationInterrupted(f"replication connection to {self._where} lost: {exc}") from exc

    async def stop(self) -> None:
        """CopyDone, then read what the server still sends until it ends the COPY (bounded)."""
        pg = self._pg
        if pg is None:
            return
        self._pg = None
        with contextlib.suppress(psycopg.OperationalError, TimeoutError):
            async with asyncio.timeout(STOP_DRAIN_SECONDS):
                async with self._write_lock:
                    while pg.put_copy_end(None) == 0:
                        await self._wait(writable=True, pg=pg)
                    while pg.flush() == 1:
                        await self._wait(writable=True, pg=pg)
                while (size := pg.get_copy_data(1)[0]) >= 0:
                    if size == 0:
                        await self._wait(writable=False, pg=pg)
                        pg.consume_input()
                while await self._next_result(pg) is not None:
                    pass

    async def close(self) -> None:
        self._pg = None
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.close()

    async def _wait(self, *, writable: bool, pg: pq.abc.PGconn | None = None) -> None:
        loop = asyncio.get_running_loop()
        fd = (pg or self._streaming()).socket
        ready = loop.create_future()

        def wake() -> None:
            if not ready.done():
                ready.set_result(None)

        (loop.add_writer if writable else loop.add_reader)(fd, wake)
        try:
            await ready
        finally:
            (loop.remove_writer if writable else loop.remove_reader)(fd)

    async def _end_reason(self, pg: pq.abc.PGconn) -> str:
        result = await self._next_result(pg)
        if result is not None and result.status == pq.ExecStatus.FATAL_ERROR:
            message = result.error_field(pq.DiagnosticField.MESSAGE_PRIMARY) or b"error"
            return message.decode(errors="replace")
        return "COPY ended"

    async def _next_result(self, pg: pq.abc.PGconn) -> pq.abc.PGresult | None:
        """PQgetResult without blocking the loop: wait for the socket while libpq is busy."""
        while pg.is_busy():
            await self._wait(writable=False, pg=pg)
            pg.consume_input()
        return pg.get_result()

    def _streaming(self) -> pq.abc.PGconn:
        if self._pg is None:
            raise ReplicationInterrupted(f"not streaming from {self._where}")
        return self._pg

    def _c(self) -> psycopg.AsyncConnection:
        if self._conn is None:
            raise ReplicationInterrupted(f"not connected to {self._where}: open() first")
        return self._conn


def _slot(name: str) -> str:
    if not _SLOT_NAME.fullmatch(name):
        raise IngestError(f"invalid replication slot name {name!r}: use 1-63 lowercase letters, digits and '_'")
    return name

"""Bootstrapping a new client from the server's stored snapshots (ListSnapshots + FetchSnapshot) instead of a full
snapshot streamed by Sync: the option `bootstrap_from_server_snapshot`.

Before the first Sync stream: ListSnapshots (limit 1) names the newest stored snapshot; a Sync call with its id,
closed at once, tells whether the server can continue it (DELTA_FROM_SNAPSHOT or DELTA) and the table's columns,
which FetchSnapshot does not carry; FetchSnapshot streams its rows, decoded as Sync's are, installed with the
snapshot's id and source position as the cursor, from which the first stream resumes. Each call may reach
another instance: every instance resolves a snapshot by its source position. Nothing is installed unless every
step succeeded; otherwise (no snapshot store or snapshot, a journal that no longer covers it, a failure, logged)
the client takes its usual full snapshot."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import grpc

from laredo.replication.v1 import replication_pb2 as pb
from laredo.replication.v1 import replication_pb2_grpc as pb_grpc

from laredo_client.channels import open_channel
from laredo_client.client_replica import ClientReplica, Cursor
from laredo_client.credentials import call_metadata
from laredo_client.indexed_state import Row
from laredo_client.options import ClientOptions
from laredo_client.values import Column, RowDecoder

log = logging.getLogger(__name__)

_RESUMABLE = (pb.SYNC_MODE_DELTA_FROM_SNAPSHOT, pb.SYNC_MODE_DELTA)
_NO_SNAPSHOTS = (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.NOT_FOUND)


class BootstrapSkipped(Exception):
    """The server snapshot cannot be used; the message says why (the client takes a full snapshot instead)."""


@dataclass(frozen=True, slots=True)
class ServerSnapshot:
    snapshot_id: str
    source_position: str
    columns: tuple[Column, ...]
    rows: list[Row]


async def bootstrap_from_server_snapshot(options: ClientOptions, replica: ClientReplica) -> ServerSnapshot | None:
    """Install the server's newest stored snapshot into `replica` (see the module docstring); None when the
    client goes on with a full snapshot instead (the reason is logged)."""
    table = f"{options.schema}.{options.table}"
    try:
        snapshot = await fetch_server_snapshot(options)
    except BootstrapSkipped as exc:
        log.info("%s: no bootstrap from a server snapshot (%s); starting with a full snapshot", table, exc)
        return None
    except (grpc.aio.AioRpcError, TimeoutError) as exc:
        detail = f"{exc.code().name}: {exc.details()}" if isinstance(exc, grpc.aio.AioRpcError) else "timed out"
        log.warning("%s: bootstrap from a server snapshot failed (%s); starting with a full snapshot", table, detail)
        return None
    replica.restore(snapshot.rows, snapshot.columns, Cursor(0, snapshot.source_position, snapshot.snapshot_id, ""))
    log.info("%s: bootstrapped from server snapshot %s: %d rows at source position %s", table, snapshot.snapshot_id,
             len(snapshot.rows), snapshot.source_position or "(none)")
    return snapshot


async def fetch_server_snapshot(options: ClientOptions) -> ServerSnapshot:
    """The newest stored snapshot the server can continue, with its rows; BootstrapSkipped when there is none,
    AioRpcError or TimeoutError when a call fails."""
    channel = open_channel(options)
    try:
        stub = pb_grpc.TableSyncReplicationStub(channel)
        info = await _newest(stub, options)
        columns = await _columns_if_resumable(stub, options, info)
        rows, position = await _rows(stub, options, info, RowDecoder(columns))
    finally:
        await channel.close()
    return ServerSnapshot(info.snapshot_id, position or info.source_position, columns, rows)


async def _newest(stub: pb_grpc.TableSyncReplicationStub, options: ClientOptions) -> pb.ReplicationSnapshotInfo:
    try:
        listed = await stub.ListSnapshots(pb.ListSnapshotsRequest(schema=options.schema, table=options.table, limit=1),
                                          timeout=options.heartbeat_timeout, metadata=call_metadata(options.token))
    except grpc.aio.AioRpcError as exc:
        if exc.code() in _NO_SNAPSHOTS:
            raise BootstrapSkipped(f"the server keeps no snapshots of the table ({exc.details()})") from None
        raise
    if not listed.snapshots:
        raise BootstrapSkipped("the server holds no snapshot of the table yet")
    return listed.snapshots[0]


async def _columns_if_resumable(stub: pb_grpc.TableSyncReplicationStub, options: ClientOptions,
                                info: pb.ReplicationSnapshotInfo) -> tuple[Column, ...]:
    """The table's columns, once a Sync naming the snapshot was answered with a mode that continues it."""
    call = stub.Sync(pb.SyncRequest(schema=options.schema, table=options.table, client_id=options.client_id,
                                    last_snapshot_id=info.snapshot_id),
                     metadata=call_metadata(options.token))
    try:
        first = await asyncio.wait_for(call.read(), options.heartbeat_timeout)
    finally:
        call.cancel()
    if first is grpc.aio.EOF or first.WhichOneof("message") != "handshake":
        raise BootstrapSkipped("the server's Sync did not start with a handshake")
    handshake = first.handshake
    if handshake.mode not in _RESUMABLE:
        raise BootstrapSkipped(f"the server would not continue snapshot {info.snapshot_id} (its journal no longer "
                               f"covers it: {pb.SyncMode.Name(handshake.mode)})")
    return tuple(Column.from_proto(d) for d in handshake.columns)


async def _rows(stub: pb_grpc.TableSyncReplicationStub, options: ClientOptions, info: pb.ReplicationSnapshotInfo,
                decoder: RowDecoder) -> tuple[list[Row], str]:
    """Every row of the snapshot and the source position it reflects; each message within heartbeat_timeout."""
    call = stub.FetchSnapshot(pb.FetchSnapshotRequest(snapshot_id=info.snapshot_id),
                              metadata=call_metadata(options.token))
    rows: list[Row] = []
    position = ""
    try:
        while True:
            response = await asyncio.wait_for(call.read(), options.heartbeat_timeout)
            if response is grpc.aio.EOF:
                raise BootstrapSkipped(f"FetchSnapshot of {info.snapshot_id} ended before its end message")
            chunk = response.WhichOneof("chunk")
            if chunk == "row":
                rows.append(decoder.decode(response.row.row))
            elif chunk == "begin":
                position = response.begin.source_position
            elif chunk == "end":
                if response.end.rows_sent != len(rows):
                    raise BootstrapSkipped(f"snapshot {info.snapshot_id}: {len(rows)} rows arrived, the server "
                                           f"says it sent {response.end.rows_sent}")
                return rows, response.end.source_position or position
    finally:
        call.cancel()

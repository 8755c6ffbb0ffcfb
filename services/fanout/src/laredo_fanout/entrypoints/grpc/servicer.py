"""The Replication service, registered under the specification's and upstream's names.

Sync and FetchSnapshot send pre-serialized response bytes (built once per row or entry and shared by
every client), so their handlers' response serializer is the identity.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import grpc

from laredo.replication.v1 import replication_pb2 as pb
from laredo_core.grpc_errors import status_for
from laredo_core.snapshots.errors import SnapshotError

from laredo_fanout.application.targets import FanoutTargets
from laredo_fanout.domain.errors import ClientFellBehind, ClientTooSlow, FanoutError
from laredo_fanout.entrypoints.grpc import mappers

log = logging.getLogger(__name__)

SERVICE_NAMES = (
    pb.DESCRIPTOR.services_by_name["TableSyncReplication"].full_name,
    pb.DESCRIPTOR.services_by_name["LaredoReplicationService"].full_name,
)


def _pre_serialized(message: bytes) -> bytes:
    return message


class ReplicationServicer:
    def __init__(self, targets: FanoutTargets) -> None:
        self._targets = targets

    async def sync(self, request: pb.SyncRequest, context: grpc.aio.ServicerContext) -> None:
        """Writes with context.write, so a client that stops reading can be ended while a write waits."""
        try:
            session = self._targets.open_session(mappers.sync_request(request))
            await session.serve(context.write)
        except (FanoutError, SnapshotError) as exc:
            if isinstance(exc, (ClientFellBehind, ClientTooSlow)):
                log.warning("%s.%s: %s", request.schema, request.table, exc)
            if not context.cancelled():  # a client that already left gets no status
                await _abort(context, request, exc)

    async def get_replication_status(self, request: pb.GetReplicationStatusRequest,
                                     context: grpc.aio.ServicerContext) -> pb.GetReplicationStatusResponse:
        try:
            return mappers.status_response(self._targets.status(request.schema, request.table))
        except (FanoutError, SnapshotError) as exc:
            await context.abort(*status_for(exc))
            raise  # unreachable: abort raises

    async def list_snapshots(self, request: pb.ListSnapshotsRequest,
                             context: grpc.aio.ServicerContext) -> pb.ListSnapshotsResponse:
        try:
            manifests = await self._targets.list_snapshots(request.schema, request.table, request.limit)
        except (FanoutError, SnapshotError) as exc:
            await context.abort(*status_for(exc))
            raise  # unreachable: abort raises
        return pb.ListSnapshotsResponse(snapshots=[mappers.snapshot_info(m, self._targets.advertised_sequence(m))
                                                   for m in manifests])

    async def fetch_snapshot(self, request: pb.FetchSnapshotRequest,
                             context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        try:
            snapshots, manifest = await self._targets.find_snapshot(request.snapshot_id)
            async with aclosing(self._targets.snapshot_messages(snapshots, manifest)) as messages:
                async for message in messages:
                    yield message
        except (FanoutError, SnapshotError) as exc:
            await context.abort(*status_for(exc))


async def _abort(context: grpc.aio.ServicerContext, request: pb.SyncRequest, exc: Exception) -> None:
    """End the stream with the error's status; a client whose transport is gone (it closed its channel, or a
    write to it is still pending) cannot take one: that is the ordinary end of a client that left."""
    try:
        await context.abort(*status_for(exc))
    except grpc.aio.AbortError:
        raise
    except Exception as failed:  # noqa: BLE001 - gRPC core's ExecuteBatchError has no public type
        log.info("%s.%s: client %s left before its stream could be ended with %s (%s: %s)", request.schema,
                 request.table, request.client_id or "(anonymous)", type(exc).__name__, type(failed).__name__, failed)
        raise asyncio.CancelledError from None  # the call is over; gRPC logs a cancelled handler at debug level


def generic_handlers(servicer: ReplicationServicer) -> list[grpc.GenericRpcHandler]:
    """One handler per service name, both backed by the same servicer."""
    methods: dict[str, Any] = {
        "Sync": grpc.unary_stream_rpc_method_handler(
            servicer.sync, request_deserializer=pb.SyncRequest.FromString,
            response_serializer=_pre_serialized),
        "GetReplicationStatus": grpc.unary_unary_rpc_method_handler(
            servicer.get_replication_status, request_deserializer=pb.GetReplicationStatusRequest.FromString,
            response_serializer=pb.GetReplicationStatusResponse.SerializeToString),
        "ListSnapshots": grpc.unary_unary_rpc_method_handler(
            servicer.list_snapshots, request_deserializer=pb.ListSnapshotsRequest.FromString,
            response_serializer=pb.ListSnapshotsResponse.SerializeToString),
        "FetchSnapshot": grpc.unary_stream_rpc_method_handler(
            servicer.fetch_snapshot, request_deserializer=pb.FetchSnapshotRequest.FromString,
            response_serializer=_pre_serialized),
    }
    return [grpc.method_handlers_generic_handler(name, methods) for name in SERVICE_NAMES]

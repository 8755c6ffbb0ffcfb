"""The snapshot RPCs of the OAM servicer (a mixin): parse, call one Snapshots use case, map back."""

from __future__ import annotations

import grpc
from laredo.v1 import oam_pb2

from laredo_oam.application.snapshots import HOW_TO_CONFIGURE, Snapshots
from laredo_oam.entrypoints.grpc import snapshot_mappers
from laredo_oam.entrypoints.grpc.errors import mapped_errors, set_up

Context = grpc.aio.ServicerContext


class SnapshotHandlers:
    """CreateSnapshot, ListSnapshots, InspectSnapshot, DeleteSnapshot and PruneSnapshots.

    The servicer sets `_snapshots` (None: the service was built without snapshot management).
    """

    _snapshots: Snapshots | None = None

    def _snapshot_use_cases(self) -> Snapshots:
        return set_up(self._snapshots, f"snapshot management is not set up in this OAM service: {HOW_TO_CONFIGURE}")

    @mapped_errors
    async def CreateSnapshot(self, request: oam_pb2.CreateSnapshotRequest,
                             context: Context) -> oam_pb2.CreateSnapshotResponse:
        created = await self._snapshot_use_cases().create(list(request.tables),
                                                          snapshot_mappers.user_meta(request.user_meta))
        return oam_pb2.CreateSnapshotResponse(accepted=created.accepted, snapshot_id=created.snapshot_id,
                                              message=created.message)

    @mapped_errors
    async def ListSnapshots(self, request: oam_pb2.ListSnapshotsRequest,
                            context: Context) -> oam_pb2.ListSnapshotsResponse:
        snapshots = await self._snapshot_use_cases().list(request.table, request.limit)
        return oam_pb2.ListSnapshotsResponse(snapshots=[snapshot_mappers.snapshot_info(s) for s in snapshots])

    @mapped_errors
    async def InspectSnapshot(self, request: oam_pb2.InspectSnapshotRequest,
                              context: Context) -> oam_pb2.InspectSnapshotResponse:
        found = await self._snapshot_use_cases().find(request.snapshot_id)
        return oam_pb2.InspectSnapshotResponse(info=snapshot_mappers.snapshot_info(found))

    @mapped_errors
    async def DeleteSnapshot(self, request: oam_pb2.DeleteSnapshotRequest,
                             context: Context) -> oam_pb2.DeleteSnapshotResponse:
        return oam_pb2.DeleteSnapshotResponse(deleted=await self._snapshot_use_cases().delete(request.snapshot_id))

    @mapped_errors
    async def PruneSnapshots(self, request: oam_pb2.PruneSnapshotsRequest,
                             context: Context) -> oam_pb2.PruneSnapshotsResponse:
        deleted = await self._snapshot_use_cases().prune(request.keep, request.table)
        return oam_pb2.PruneSnapshotsResponse(deleted_count=deleted)

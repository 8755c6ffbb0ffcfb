"""RestoreSnapshot and the replay RPCs of the OAM servicer (a mixin): parse, call one use case, map back."""

from __future__ import annotations

import grpc
from laredo.v1 import oam_pb2

from laredo_oam.application.replay import Replays
from laredo_oam.application.restore import Restores
from laredo_oam.entrypoints.grpc import mappers
from laredo_oam.entrypoints.grpc.errors import mapped_errors, set_up

Context = grpc.aio.ServicerContext
NOT_SET_UP = "restores and replays are not set up in this OAM service (it was built without them)"


class ReplayHandlers:
    """RestoreSnapshot, StartReplay, GetReplayStatus and StopReplay.

    The servicer sets `_restores` and `_replays` (None: built without them; the RPCs answer FAILED_PRECONDITION).
    """

    _restores: Restores | None = None
    _replays: Replays | None = None

    @mapped_errors
    async def RestoreSnapshot(self, request: oam_pb2.RestoreSnapshotRequest,
                              context: Context) -> oam_pb2.RestoreSnapshotResponse:
        restored = await set_up(self._restores, NOT_SET_UP).restore(request.snapshot_id, confirm=request.confirm,
                                                                    skip_meta_check=request.skip_meta_check)
        return oam_pb2.RestoreSnapshotResponse(accepted=restored.accepted, message=restored.message,
                                               user_meta=mappers.struct(restored.user_meta),
                                               warnings=list(restored.warnings))

    @mapped_errors
    async def StartReplay(self, request: oam_pb2.StartReplayRequest, context: Context) -> oam_pb2.StartReplayResponse:
        started = await self._replay_use_cases().start(request.snapshot_id, request.target_pipeline_id, request.speed,
                                                       list(request.tables))
        return oam_pb2.StartReplayResponse(accepted=started.accepted, replay_id=started.rebuild_id,
                                           message=started.message)

    @mapped_errors
    async def GetReplayStatus(self, request: oam_pb2.GetReplayStatusRequest,
                              context: Context) -> oam_pb2.GetReplayStatusResponse:
        status = await self._replay_use_cases().status(request.replay_id)
        return oam_pb2.GetReplayStatusResponse(replay_id=status.rebuild_id, state=status.state.value,
                                               rows_replayed=status.rows_replayed,
                                               elapsed=mappers.duration(status.elapsed))

    @mapped_errors
    async def StopReplay(self, request: oam_pb2.StopReplayRequest, context: Context) -> oam_pb2.StopReplayResponse:
        return oam_pb2.StopReplayResponse(stopped=await self._replay_use_cases().stop(request.replay_id))

    def _replay_use_cases(self) -> Replays:
        return set_up(self._replays, NOT_SET_UP)

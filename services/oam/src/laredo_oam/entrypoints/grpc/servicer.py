"""The OAM gRPC servicer: thin handlers (parse, call one use case, map back) for every RPC of the service."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
from laredo.v1 import oam_pb2, oam_pb2_grpc
from laredo_core.coordination.ports import CommandStatus
from laredo_core.grpc_server import ServiceRegistration

from laredo_oam.application.administration import Administration, Outcome
from laredo_oam.application.dead_letters import DeadLetters
from laredo_oam.application.replay import Rebuilds
from laredo_oam.application.snapshots import Snapshots
from laredo_oam.application.status_view import StatusView
from laredo_oam.application.status_watch import StatusWatch
from laredo_oam.domain.errors import PreconditionFailed
from laredo_oam.domain.states import ServiceState
from laredo_oam.entrypoints.grpc import mappers
from laredo_oam.entrypoints.grpc.errors import mapped_errors, status_for
from laredo_oam.entrypoints.grpc.redacted import redacted

#: The specification's name first, then the upstream Laredo alias; both serve the same servicer.
OAM_SERVICE_NAMES = ("laredo.v1.TableSyncOAM", "laredo.v1.LaredoOAMService")

Context = grpc.aio.ServicerContext


class OamServicer:
    """Every RPC of laredo.v1.TableSyncOAM (and its upstream alias)."""

    def __init__(self, status: StatusView, admin: Administration, *, snapshots: Snapshots, watch: StatusWatch,
                 rebuilds: Rebuilds, dead_letters: DeadLetters) -> None:
        self._status, self._admin, self._watch = status, admin, watch
        self._snapshots, self._rebuilds, self._dead_letters = snapshots, rebuilds, dead_letters

    @mapped_errors
    async def GetStatus(self, request: oam_pb2.GetStatusRequest, context: Context) -> oam_pb2.GetStatusResponse:
        return mappers.system_status(await self._status.system_status(), await self._snapshots.summary())

    @mapped_errors
    async def GetTableStatus(self, request: oam_pb2.GetTableStatusRequest,
                             context: Context) -> oam_pb2.GetTableStatusResponse:
        pipelines = await self._status.table_status(request.schema, request.table)
        # The table's indexes are those of its indexed-memory target (one per table).
        indexes = next((p.indexes for p in pipelines if p.indexes), ())
        return oam_pb2.GetTableStatusResponse(pipelines=[mappers.pipeline(p) for p in pipelines],
                                              indexes=mappers.indexes(indexes))

    @mapped_errors
    async def GetPipelineStatus(self, request: oam_pb2.GetPipelineStatusRequest,
                                context: Context) -> oam_pb2.GetPipelineStatusResponse:
        view = await self._status.pipeline_status(request.pipeline_id)
        return oam_pb2.GetPipelineStatusResponse(status=mappers.pipeline(view), indexes=mappers.indexes(view.indexes))

    async def WatchStatus(self, request: oam_pb2.WatchStatusRequest,
                          context: Context) -> AsyncIterator[oam_pb2.WatchStatusResponse]:
        """State and row changes until the client leaves; initial metadata is sent once the watch is in place."""
        try:
            watch_filter = self._watch.filter_for(request.tables, request.pipeline_ids)
        except Exception as exc:
            await context.abort(*status_for(exc))
            return
        async with self._watch.watch(watch_filter) as watcher:
            await context.send_initial_metadata(())
            async for event in watcher:
                yield redacted(mappers.watch_response(event))

    @mapped_errors
    async def CheckReady(self, request: oam_pb2.CheckReadyRequest, context: Context) -> oam_pb2.CheckReadyResponse:
        readiness = await self._status.check_ready(request.source, request.table, request.pipeline_id)
        return oam_pb2.CheckReadyResponse(ready=readiness.ready, not_ready_reasons=readiness.not_ready_reasons)

    @mapped_errors
    async def GetSourceInfo(self, request: oam_pb2.GetSourceInfoRequest,
                            context: Context) -> oam_pb2.GetSourceInfoResponse:
        sources = await self._status.source_info(request.source_id)
        return oam_pb2.GetSourceInfoResponse(sources=[mappers.source_info(s) for s in sources])

    @mapped_errors
    async def ListInstances(self, request: oam_pb2.ListInstancesRequest,
                            context: Context) -> oam_pb2.ListInstancesResponse:
        instances = await self._status.instances(request.service)
        return oam_pb2.ListInstancesResponse(instances=[mappers.instance_info(i) for i in instances])

    @mapped_errors
    async def ListTables(self, request: oam_pb2.ListTablesRequest, context: Context) -> oam_pb2.ListTablesResponse:
        catalog = self._status.catalog
        return oam_pb2.ListTablesResponse(tables=[
            config for listing in await self._status.list_tables()
            for config in mappers.table_configs(listing, catalog.source(listing.table.source_id))])

    @mapped_errors
    async def GetTableSchema(self, request: oam_pb2.GetTableSchemaRequest,
                             context: Context) -> oam_pb2.GetTableSchemaResponse:
        columns = await self._status.table_schema(request.schema, request.table)
        return oam_pb2.GetTableSchemaResponse(columns=[mappers.column(c) for c in columns])

    @mapped_errors
    async def ReloadTable(self, request: oam_pb2.ReloadTableRequest, context: Context) -> oam_pb2.ReloadTableResponse:
        outcome = await self._admin.reload_table(request.source_id, request.schema, request.table)
        return oam_pb2.ReloadTableResponse(accepted=outcome.accepted, message=outcome.message)

    @mapped_errors
    async def ReloadAll(self, request: oam_pb2.ReloadAllRequest, context: Context) -> oam_pb2.ReloadAllResponse:
        outcome = await self._admin.reload_all(request.source_id)
        return oam_pb2.ReloadAllResponse(accepted=outcome.accepted, message=outcome.message)

    @mapped_errors
    async def PauseSync(self, request: oam_pb2.PauseSyncRequest, context: Context) -> oam_pb2.PauseSyncResponse:
        _succeeded("pause", await self._admin.pause(request.source_id))
        return oam_pb2.PauseSyncResponse(state=mappers.service_state(ServiceState.PAUSED))

    @mapped_errors
    async def ResumeSync(self, request: oam_pb2.ResumeSyncRequest, context: Context) -> oam_pb2.ResumeSyncResponse:
        _succeeded("resume", await self._admin.resume(request.source_id))
        return oam_pb2.ResumeSyncResponse(state=mappers.service_state(ServiceState.STREAMING))

    @mapped_errors
    async def ResetSource(self, request: oam_pb2.ResetSourceRequest, context: Context) -> oam_pb2.ResetSourceResponse:
        outcome = await self._admin.reset(request.source_id, confirm=request.confirm,
                                          drop_publication=request.drop_publication)
        return oam_pb2.ResetSourceResponse(accepted=outcome.accepted, message=outcome.message,
                                           details=mappers.struct(outcome.details))

    @mapped_errors
    async def DrainReplication(self, request: oam_pb2.DrainReplicationRequest,
                               context: Context) -> oam_pb2.DrainReplicationResponse:
        outcome = await self._admin.drain(request.schema, request.table, request.drain_deadline_seconds,
                                          instance_id=request.instance_id, force=request.force)
        drained = [r.executed_by for r in outcome.results if r.status is CommandStatus.SUCCEEDED]
        return oam_pb2.DrainReplicationResponse(accepted=outcome.accepted, message=outcome.message,
                                                drained_targets=len(drained), drained_instances=drained)

    @mapped_errors
    async def CreateSnapshot(self, request: oam_pb2.CreateSnapshotRequest,
                             context: Context) -> oam_pb2.CreateSnapshotResponse:
        created = await self._snapshots.create(list(request.tables), mappers.user_meta(request.user_meta))
        return oam_pb2.CreateSnapshotResponse(accepted=created.accepted, snapshot_id=created.snapshot_id,
                                              message=created.message)

    @mapped_errors
    async def ListSnapshots(self, request: oam_pb2.ListSnapshotsRequest,
                            context: Context) -> oam_pb2.ListSnapshotsResponse:
        snapshots = await self._snapshots.list(request.table, request.limit)
        return oam_pb2.ListSnapshotsResponse(snapshots=[mappers.snapshot_info(s) for s in snapshots])

    @mapped_errors
    async def InspectSnapshot(self, request: oam_pb2.InspectSnapshotRequest,
                              context: Context) -> oam_pb2.InspectSnapshotResponse:
        found = await self._snapshots.find(request.snapshot_id)
        return oam_pb2.InspectSnapshotResponse(info=mappers.snapshot_info(found))

    @mapped_errors
    async def DeleteSnapshot(self, request: oam_pb2.DeleteSnapshotRequest,
                             context: Context) -> oam_pb2.DeleteSnapshotResponse:
        return oam_pb2.DeleteSnapshotResponse(deleted=await self._snapshots.delete(request.snapshot_id))

    @mapped_errors
    async def PruneSnapshots(self, request: oam_pb2.PruneSnapshotsRequest,
                             context: Context) -> oam_pb2.PruneSnapshotsResponse:
        deleted = await self._snapshots.prune(request.keep, request.table)
        return oam_pb2.PruneSnapshotsResponse(deleted_count=deleted)

    @mapped_errors
    async def RestoreSnapshot(self, request: oam_pb2.RestoreSnapshotRequest,
                              context: Context) -> oam_pb2.RestoreSnapshotResponse:
        restored = await self._rebuilds.restore(request.snapshot_id, confirm=request.confirm,
                                                skip_meta_check=request.skip_meta_check)
        return oam_pb2.RestoreSnapshotResponse(accepted=restored.accepted, message=restored.message,
                                               user_meta=mappers.struct(restored.user_meta),
                                               warnings=list(restored.warnings))

    @mapped_errors
    async def StartReplay(self, request: oam_pb2.StartReplayRequest, context: Context) -> oam_pb2.StartReplayResponse:
        started = await self._rebuilds.start_replay(request.snapshot_id, request.target_pipeline_id, request.speed,
                                                    list(request.tables))
        return oam_pb2.StartReplayResponse(accepted=started.accepted, replay_id=started.rebuild_id,
                                           message=started.message)

    @mapped_errors
    async def GetReplayStatus(self, request: oam_pb2.GetReplayStatusRequest,
                              context: Context) -> oam_pb2.GetReplayStatusResponse:
        status = await self._rebuilds.status(request.replay_id)
        return oam_pb2.GetReplayStatusResponse(replay_id=status.rebuild_id, state=status.state.value,
                                               rows_replayed=status.rows_replayed,
                                               elapsed=mappers.duration(status.elapsed))

    @mapped_errors
    async def StopReplay(self, request: oam_pb2.StopReplayRequest, context: Context) -> oam_pb2.StopReplayResponse:
        return oam_pb2.StopReplayResponse(stopped=await self._rebuilds.stop(request.replay_id))

    @mapped_errors
    async def ListDeadLetters(self, request: oam_pb2.ListDeadLettersRequest,
                              context: Context) -> oam_pb2.ListDeadLettersResponse:
        page = await self._dead_letters.list(request.pipeline_id, request.limit)
        return oam_pb2.ListDeadLettersResponse(entries=[mappers.dead_letter_entry(letter) for letter in page.letters],
                                               total_count=page.total)

    @mapped_errors
    async def ReplayDeadLetters(self, request: oam_pb2.ReplayDeadLettersRequest,
                                context: Context) -> oam_pb2.ReplayDeadLettersResponse:
        totals = await self._dead_letters.replay(request.pipeline_id)
        return oam_pb2.ReplayDeadLettersResponse(replayed=totals.replayed, succeeded=totals.succeeded,
                                                 failed=totals.failed)

    @mapped_errors
    async def PurgeDeadLetters(self, request: oam_pb2.PurgeDeadLettersRequest,
                               context: Context) -> oam_pb2.PurgeDeadLettersResponse:
        return oam_pb2.PurgeDeadLettersResponse(purged=await self._dead_letters.purge(request.pipeline_id))


def _succeeded(what: str, outcome: Outcome) -> None:
    if not outcome.accepted:
        raise PreconditionFailed(f"{what} was not carried out: {outcome.message}")


def oam_registration(servicer: OamServicer) -> ServiceRegistration:
    """The servicer under both service names, ready for laredo_core.grpc_server.start_grpc_server."""
    return ServiceRegistration(
        servicer=servicer,
        add_functions=(oam_pb2_grpc.add_TableSyncOAMServicer_to_server,
                       oam_pb2_grpc.add_LaredoOAMServiceServicer_to_server),
        service_names=OAM_SERVICE_NAMES,
    )

"""Every OAM command against a scripted OAM gRPC server: the requests it builds, what it prints, its exit code.

Covers the RPCs the OAM service may still answer UNIMPLEMENTED (WatchStatus, snapshots, dead letters,
replay), so the CLI is checked independently of the service's progress.
"""

from __future__ import annotations

import asyncio
import builtins
import signal
from collections.abc import AsyncIterator

import grpc
import pytest
from google.protobuf import timestamp_pb2
from laredo.v1 import oam_pb2

from libs.cli.tests.cli_runner import Result, laredo_command, run_in_process, subprocess_env
from libs.cli.tests.fake_oam import OAM_METHODS, FakeOamServer, start_fake_oam

USERS = "pg:public.users:indexed-memory"


@pytest.fixture
async def oam() -> AsyncIterator[FakeOamServer]:
    server = await start_fake_oam()
    yield server
    await server.server.stop(None)


async def laredo(oam: FakeOamServer, *argv: str, interactive: bool = False) -> Result:
    return await run_in_process("--server", oam.address, *argv, interactive=interactive)


def stamp(seconds: int) -> timestamp_pb2.Timestamp:
    value = timestamp_pb2.Timestamp()
    value.FromSeconds(seconds)
    return value


T0 = 1_767_225_600  # 2026-01-01T00:00:00Z
EVENTS = [
    oam_pb2.WatchStatusResponse(timestamp=stamp(T0), service_state_change=oam_pb2.ServiceStateChange(
        old_state=oam_pb2.SERVICE_STATE_BASELINING, new_state=oam_pb2.SERVICE_STATE_STREAMING)),
    oam_pb2.WatchStatusResponse(timestamp=stamp(T0 + 1), pipeline_state_change=oam_pb2.PipelineStateChangeEvent(
        pipeline_id=USERS, old_state=oam_pb2.PIPELINE_STATE_BASELINING, new_state=oam_pb2.PIPELINE_STATE_STREAMING)),
    oam_pb2.WatchStatusResponse(timestamp=stamp(T0 + 2), source_state_change=oam_pb2.SourceStateChange(
        source_id="pg", event_type="disconnected", message="connection reset")),
    oam_pb2.WatchStatusResponse(timestamp=stamp(T0 + 3), row_change=oam_pb2.RowChange(
        pipeline_id=USERS, schema="public", table="users", action="UPDATE", position="0/16B3800", xid=701)),
]


async def test_watch_prints_one_line_per_event_and_sends_the_filters(oam: FakeOamServer) -> None:
    oam.servicer.watch_events = EVENTS
    result = await laredo(oam, "watch", "--table", "users", "--pipeline", USERS, "--count", "4")
    assert result.code == 0, result
    assert result.out.splitlines() == [
        "2026-01-01T00:00:00Z  service   BASELINING -> STREAMING",
        f"2026-01-01T00:00:01Z  pipeline  {USERS} BASELINING -> STREAMING",
        "2026-01-01T00:00:02Z  source    pg disconnected: connection reset",
        f"2026-01-01T00:00:03Z  row       {USERS} UPDATE public.users at 0/16B3800 xid 701",
    ]
    [request] = oam.servicer.requests_of("WatchStatus")
    assert (list(request.tables), list(request.pipeline_ids)) == (["public.users"], [USERS])
    await asyncio.wait_for(oam.servicer.watchers_left.wait(), 5)  # the CLI left the stream


async def test_watch_json_prints_one_object_per_line(oam: FakeOamServer) -> None:
    oam.servicer.watch_events = EVENTS
    result = await laredo(oam, "watch", "--json", "--count", "4")
    assert result.code == 0, result
    events = result.json_lines()
    assert [next(k for k in e if k != "timestamp") for e in events] == [
        "service_state_change", "pipeline_state_change", "source_state_change", "row_change"]
    assert events[0] == {"timestamp": "2026-01-01T00:00:00Z", "service_state_change": {
        "old_state": "SERVICE_STATE_BASELINING", "new_state": "SERVICE_STATE_STREAMING"}}
    assert events[3]["row_change"]["xid"] == 701


async def test_watch_ends_with_0_after_timeout_or_when_the_server_ends_the_stream(oam: FakeOamServer) -> None:
    quiet = await laredo(oam, "watch", "--timeout", "300ms")
    assert (quiet.code, quiet.out) == (0, ""), quiet
    oam.servicer.watch_events, oam.servicer.watch_end = EVENTS[:1], True
    ended = await laredo(oam, "watch")
    assert (ended.code, len(ended.out.splitlines())) == (0, 1), ended


async def test_watch_reports_unimplemented_clearly(oam: FakeOamServer) -> None:
    oam.servicer.fail("WatchStatus", grpc.StatusCode.UNIMPLEMENTED, "WatchStatus is not available yet")
    result = await laredo(oam, "watch")
    assert result.code == 7, result
    assert f"OAM service at {oam.address} answered UNIMPLEMENTED: WatchStatus is not available yet" in result.err


async def test_watch_ends_with_0_on_ctrl_c(oam: FakeOamServer) -> None:
    oam.servicer.watch_events = EVENTS[:1]
    process = await asyncio.create_subprocess_exec(
        *laredo_command(), "watch", "--server", oam.address, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=subprocess_env())
    try:
        assert process.stdout is not None
        first = await asyncio.wait_for(process.stdout.readline(), 30)
        assert b"BASELINING -> STREAMING" in first
        process.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(process.wait(), 30) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    await asyncio.wait_for(oam.servicer.watchers_left.wait(), 5)


def snapshot(snapshot_id: str, size: int, rows: int) -> oam_pb2.SnapshotInfo:
    info = oam_pb2.SnapshotInfo(snapshot_id=snapshot_id, created_at=stamp(T0), format="jsonl", size_bytes=size,
                                store_type="s3", store_location="s3://bucket/snaps",
                                source_positions=[oam_pb2.SourcePositionEntry(source_id="pg", position="0/1")],
                                tables=[oam_pb2.TableSnapshotSummary(schema="public", table="users",
                                                                     row_count=rows, target_type="indexed-memory")])
    info.user_meta.update({"reason": "deploy"})
    return info


async def test_snapshot_listing_creation_and_inspection(oam: FakeOamServer) -> None:
    oam.servicer.responses["ListSnapshots"] = oam_pb2.ListSnapshotsResponse(
        snapshots=[snapshot("snap-2", 1536, 7), snapshot("snap-1", 10, 5)])
    listed = await laredo(oam, "snapshots", "list", "--table", "users", "--limit", "5")
    assert listed.code == 0, listed
    assert listed.out.splitlines()[0].split() == ["SNAPSHOT", "CREATED", "FORMAT", "SIZE", "TABLES"]
    assert "snap-2    2026-01-01T00:00:00Z  jsonl   1.5 KiB  public.users (7 rows)" in listed.out
    assert "10 B" in listed.out
    [request] = oam.servicer.requests_of("ListSnapshots")
    assert (request.table, request.limit) == ("public.users", 5)

    oam.servicer.responses["CreateSnapshot"] = oam_pb2.CreateSnapshotResponse(accepted=True, snapshot_id="snap-3")
    created = await laredo(oam, "snapshots", "create", "users", "sales.orders", "--meta", "reason=deploy")
    assert (created.code, created.out) == (0, "snapshot snap-3: accepted\n"), created
    [request] = oam.servicer.requests_of("CreateSnapshot")
    assert list(request.tables) == ["public.users", "sales.orders"] and request.user_meta["reason"] == "deploy"

    oam.servicer.responses["CreateSnapshot"] = oam_pb2.CreateSnapshotResponse(accepted=False, message="no store")
    refused = await laredo(oam, "snapshots", "create")
    assert refused.code == 1 and "NOT accepted" in refused.out and "no store" in refused.err, refused

    oam.servicer.responses["InspectSnapshot"] = oam_pb2.InspectSnapshotResponse(info=snapshot("snap-2", 1536, 7))
    inspected = await laredo(oam, "snapshots", "inspect", "snap-2")
    assert inspected.code == 0, inspected
    for expected in ("snapshot:     snap-2", "store:        s3 s3://bucket/snaps", "positions:    pg 0/1",
                     "meta reason:  deploy", "public.users     7  indexed-memory"):
        assert expected in inspected.out
    as_json = (await laredo(oam, "snapshots", "inspect", "snap-2", "--json")).json()
    assert as_json["info"]["tables"][0]["row_count"] == 7 and as_json["info"]["user_meta"] == {"reason": "deploy"}


async def test_destructive_snapshot_commands_need_yes(oam: FakeOamServer) -> None:
    for argv in (["snapshots", "restore", "snap-1"], ["snapshots", "delete", "snap-1"],
                 ["snapshots", "prune", "--keep", "2"], ["dead-letters", "purge", USERS], ["reset", "pg"]):
        result = await laredo(oam, *argv)
        assert result.code == 5 and "--yes" in result.err, result
    assert oam.servicer.requests == []  # nothing was sent

    oam.servicer.responses["RestoreSnapshot"] = oam_pb2.RestoreSnapshotResponse(
        accepted=True, message="restoring", warnings=["meta differs"])
    restored = await laredo(oam, "snapshots", "restore", "snap-1", "--skip-meta-check", "--yes")
    assert restored.code == 0 and "warning: meta differs" in restored.out, restored
    [request] = oam.servicer.requests_of("RestoreSnapshot")
    assert (request.snapshot_id, request.confirm, request.skip_meta_check) == ("snap-1", True, True)

    oam.servicer.responses["DeleteSnapshot"] = oam_pb2.DeleteSnapshotResponse(deleted=False)
    not_deleted = await laredo(oam, "snapshots", "delete", "snap-1", "-y")
    assert (not_deleted.code, not_deleted.out) == (1, "snapshot snap-1 NOT deleted\n"), not_deleted

    oam.servicer.responses["PruneSnapshots"] = oam_pb2.PruneSnapshotsResponse(deleted_count=4)
    pruned = await laredo(oam, "snapshots", "prune", "--keep", "2", "--table", "users", "--confirm")
    assert pruned.out == "deleted 4 snapshot(s) of public.users, kept the newest 2\n", pruned
    assert oam.servicer.requests_of("PruneSnapshots")[0].table == "public.users"


async def test_a_person_at_a_terminal_confirms_by_typing_yes(oam: FakeOamServer,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    answers = iter(["no", "yes"])
    monkeypatch.setattr(builtins, "input", lambda: next(answers))
    oam.servicer.responses["ResetSource"] = oam_pb2.ResetSourceResponse(accepted=True, message="done")
    declined = await laredo(oam, "reset", "pg", interactive=True)
    assert declined.code == 5 and "Type 'yes' to continue" in declined.err, declined
    assert oam.servicer.requests_of("ResetSource") == []
    confirmed = await laredo(oam, "reset", "pg", "--drop-publication", interactive=True)
    assert confirmed.code == 0 and "reset of source pg: accepted" in confirmed.out, confirmed
    [request] = oam.servicer.requests_of("ResetSource")
    assert (request.source_id, request.confirm, request.drop_publication) == ("pg", True, True)


async def test_dead_letters(oam: FakeOamServer) -> None:
    entry = oam_pb2.DeadLetterEntry(timestamp=stamp(T0), action="INSERT", position="0/2",
                                    error_message="duplicate key")
    entry.change_data.update({"new_values": {"id": 1}})
    oam.servicer.responses["ListDeadLetters"] = oam_pb2.ListDeadLettersResponse(entries=[entry], total_count=3)
    listed = await laredo(oam, "dead-letters", "list", USERS, "--limit", "1")
    assert listed.code == 0, listed
    assert 'INSERT  0/2       duplicate key  {"new_values":{"id":1}}' in listed.out
    assert "showing 1 of 3" in listed.out
    assert oam.servicer.requests_of("ListDeadLetters")[0].limit == 1
    assert (await laredo(oam, "dead-letters", "list", USERS, "--json")).json()["total_count"] == 3

    oam.servicer.responses["ReplayDeadLetters"] = oam_pb2.ReplayDeadLettersResponse(replayed=3, succeeded=2,
                                                                                    failed=1)
    replayed = await laredo(oam, "dead-letters", "replay", USERS)
    assert replayed.code == 1 and "2 succeeded, 1 failed" in replayed.out, replayed

    oam.servicer.responses["PurgeDeadLetters"] = oam_pb2.PurgeDeadLettersResponse(purged=3)
    purged = await laredo(oam, "dead-letters", "purge", USERS, "--yes", "--json")
    assert (purged.code, purged.json()) == (0, {"purged": 3}), purged


def replay_status(state: str, rows: int) -> oam_pb2.GetReplayStatusResponse:
    answer = oam_pb2.GetReplayStatusResponse(replay_id="r1", state=state, rows_replayed=rows)
    answer.elapsed.FromMilliseconds(1500)
    return answer


async def test_replay_start_status_and_stop(oam: FakeOamServer) -> None:
    oam.servicer.responses["StartReplay"] = oam_pb2.StartReplayResponse(accepted=True, replay_id="r1")
    started = await laredo(oam, "replay", "start", "snap-1", "users", "--pipeline", USERS, "--speed", "realtime")
    assert (started.code, started.out) == (0, "replay r1: accepted\n"), started
    [request] = oam.servicer.requests_of("StartReplay")
    assert (request.snapshot_id, request.target_pipeline_id, request.speed, list(request.tables)) == (
        "snap-1", USERS, "realtime", ["public.users"])

    oam.servicer.responses["GetReplayStatus"] = [replay_status("running", 5), replay_status("running", 9),
                                                 replay_status("completed", 12)]
    waited = await laredo(oam, "replay", "start", "snap-1", "--wait", "--poll", "10ms")
    assert waited.code == 0, waited
    assert "state:          completed" in waited.out and "rows replayed:  12" in waited.out
    assert "elapsed:        1.5s" in waited.out
    assert len(oam.servicer.requests_of("GetReplayStatus")) == 3

    oam.servicer.responses["GetReplayStatus"] = replay_status("error", 3)
    failed = await laredo(oam, "replay", "start", "snap-1", "--wait", "--json")
    assert failed.code == 1 and failed.json()["state"] == "error", failed
    status = await laredo(oam, "replay", "status", "r1", "--json")
    assert status.json() == {"replay_id": "r1", "state": "error", "rows_replayed": 3, "elapsed": 1.5}

    oam.servicer.responses["StopReplay"] = oam_pb2.StopReplayResponse(stopped=False)
    stopped = await laredo(oam, "replay", "stop", "r1")
    assert (stopped.code, stopped.out) == (1, "replay r1 NOT stopped\n"), stopped


# One invocation per OAM command, for the checks that apply to all of them.
OAM_COMMANDS = [
    ["status"], ["status", "--table", "users"], ["status", "--pipeline", USERS], ["ready"], ["sources"],
    ["watch"], ["tables"], ["schema", "users"], ["reload", "users"], ["reload", "--all"], ["pause"], ["resume"],
    ["reset", "pg", "--yes"], ["drain"], ["snapshots", "list"], ["snapshots", "create"],
    ["snapshots", "inspect", "s"], ["snapshots", "restore", "s", "--yes"], ["snapshots", "delete", "s", "--yes"],
    ["snapshots", "prune", "--keep", "1", "--yes"], ["dead-letters", "list", USERS],
    ["dead-letters", "replay", USERS], ["dead-letters", "purge", USERS, "--yes"], ["replay", "start", "s"],
    ["replay", "status", "r"], ["replay", "stop", "r"],
]


async def test_every_oam_command_reports_unimplemented_with_exit_7(oam: FakeOamServer) -> None:
    for method in OAM_METHODS:
        oam.servicer.fail(method.name, grpc.StatusCode.UNIMPLEMENTED, f"{method.name} is not available yet")
    for argv in OAM_COMMANDS:
        result = await laredo(oam, *argv)
        assert result.code == 7, (argv, result)
        assert "answered UNIMPLEMENTED" in result.err and "does not offer this operation" in result.err, result
        assert result.out == ""


@pytest.mark.parametrize(("status", "exit_code"), [
    (grpc.StatusCode.INVALID_ARGUMENT, 2), (grpc.StatusCode.UNAVAILABLE, 3), (grpc.StatusCode.NOT_FOUND, 4),
    (grpc.StatusCode.FAILED_PRECONDITION, 5), (grpc.StatusCode.INTERNAL, 8),
])
async def test_server_errors_become_exit_codes(oam: FakeOamServer, status: grpc.StatusCode, exit_code: int) -> None:
    oam.servicer.fail("GetTableSchema", status, "what went wrong")
    result = await laredo(oam, "schema", "users", "--json")
    assert (result.code, result.out) == (exit_code, ""), result
    assert result.err == f"laredo: OAM service at {oam.address} answered {status.name}: what went wrong\n"


async def test_no_answer_within_the_timeout_exits_with_6(oam: FakeOamServer) -> None:
    oam.servicer.delays["ListTables"] = 5
    result = await laredo(oam, "tables", "--timeout", "200ms")
    assert result.code == 6 and "DEADLINE_EXCEEDED" in result.err and "--timeout" in result.err, result


async def test_the_address_comes_from_the_environment(oam: FakeOamServer) -> None:
    oam.servicer.responses["ListTables"] = oam_pb2.ListTablesResponse(tables=[oam_pb2.TableConfig(
        schema="public", table="users", source_id="pg", source_type="postgresql", target_type="indexed-memory")])
    result = await run_in_process("tables", env={"LAREDO_SERVER": oam.address})
    assert result.code == 0, result
    assert result.out.splitlines() == ["TABLE         SOURCE  SOURCE TYPE  TARGET          PRIMARY KEY",
                                       "public.users  pg      postgresql   indexed-memory  -"]


async def test_status_views(oam: FakeOamServer) -> None:
    status = oam_pb2.GetStatusResponse(state=oam_pb2.SERVICE_STATE_PAUSED, last_change_at=stamp(T0),
                                       snapshot_status=oam_pb2.SnapshotSummary(
                                           enabled=True, store_type="s3", last_snapshot_id="snap-2",
                                           snapshot_count=2))
    source = status.sources.add(source_id="pg", source_type="postgresql", current_position="0/20",
                                acked_position="0/10", lag_bytes=16)
    source.lag_time.FromMilliseconds(250)
    users = status.pipelines.add(pipeline_id=USERS, state=oam_pb2.PIPELINE_STATE_PAUSED, row_count=12345,
                                 last_baseline_reason="slot dropped", last_baseline_id="16B3748-1",
                                 last_baseline_detail="replication slot laredo_pg was dropped")
    users.last_baseline_at.CopyFrom(stamp(T0))
    status.started_at.CopyFrom(stamp(T0 - 60))
    oam.servicer.responses["GetStatus"] = status
    shown = await laredo(oam, "status")
    assert shown.code == 0, shown
    assert shown.out.splitlines() == [
        "state:        PAUSED",
        "started:      2025-12-31T23:59:00Z",
        "last change:  2026-01-01T00:00:00Z",
        "snapshots:    2 kept in s3; last snap-2",
        "",
        "SOURCE  TYPE        POSITION  ACKED  LAG BYTES  LAG TIME",
        "pg      postgresql  0/20      0/10          16     0.25s",
        "",
        "PIPELINE                        STATE    ROWS  LAST CHANGE  LAST BASELINE  ERROR",
        f"{USERS}  PAUSED  12345  -            slot dropped   -",
    ]
    document = (await laredo(oam, "status", "--json")).json()
    assert document["state"] == "SERVICE_STATE_PAUSED" and document["pipelines"][0]["row_count"] == 12345

    pipeline = oam_pb2.GetPipelineStatusResponse(status=status.pipelines[0], indexes=[oam_pb2.IndexInfo(
        name="by_email", fields=["email"], unique=True, entry_count=12345)])
    oam.servicer.responses["GetPipelineStatus"] = pipeline
    one = await laredo(oam, "status", "--pipeline", USERS)
    assert "state:          PAUSED" in one.out and "by_email  email   yes       12345" in one.out, one
    assert ("last baseline:  slot dropped: replication slot laredo_pg was dropped (baseline 16B3748-1, started "
            "2026-01-01T00:00:00Z)") in one.out, one
    assert oam.servicer.requests_of("GetPipelineStatus")[0].pipeline_id == USERS
    await laredo(oam, "status", "--table", "sales.orders")
    request = oam.servicer.requests_of("GetTableStatus")[0]
    assert (request.schema, request.table) == ("sales", "orders")


async def test_ready_exits_1_with_the_reasons_when_not_ready(oam: FakeOamServer) -> None:
    oam.servicer.responses["CheckReady"] = oam_pb2.CheckReadyResponse(
        ready=False, not_ready_reasons=[f"pipeline {USERS} is baselining"])
    result = await laredo(oam, "ready", "--table", "users")
    assert (result.code, result.out) == (1, f"not ready\n  - pipeline {USERS} is baselining\n"), result
    assert oam.servicer.requests_of("CheckReady")[0].table == "public.users"
    oam.servicer.responses["CheckReady"] = oam_pb2.CheckReadyResponse(ready=True)
    ready = await laredo(oam, "ready", "--source", "pg", "--json")
    assert (ready.code, ready.json()) == (0, {"ready": True, "not_ready_reasons": []}), ready


async def test_administration_answers(oam: FakeOamServer) -> None:
    oam.servicer.responses["ReloadTable"] = oam_pb2.ReloadTableResponse(
        accepted=False, message="ingest:pg: failed (slot busy)")
    refused = await laredo(oam, "reload", "users", "--source", "pg")
    assert refused.code == 1, refused
    assert refused.out == "reload of public.users: NOT accepted\n  ingest:pg: failed (slot busy)\n"
    assert refused.err == "laredo: reload of public.users was not accepted: ingest:pg: failed (slot busy)\n"
    oam.servicer.responses["PauseSync"] = oam_pb2.PauseSyncResponse(state=oam_pb2.SERVICE_STATE_PAUSED)
    paused = await laredo(oam, "pause", "--source", "pg")
    assert (paused.code, paused.out) == (0, "state: PAUSED\n")
    assert oam.servicer.requests_of("PauseSync")[0].source_id == "pg"
    assert (await laredo(oam, "pause", "main")).code == 0  # the source as an argument, like reload's table
    assert (await laredo(oam, "resume", "main")).code == 0
    assert oam.servicer.requests_of("PauseSync")[1].source_id == "main"
    assert oam.servicer.requests_of("ResumeSync")[0].source_id == "main"
    assert (await laredo(oam, "pause", "main", "--source", "pg")).code == 2  # usage error: one or the other
    oam.servicer.responses["DrainReplication"] = oam_pb2.DrainReplicationResponse(
        accepted=True, message="fanout:f1: succeeded", drained_targets=1, drained_instances=["f1"])
    drained = await laredo(oam, "drain", "users", "--instance", "f1", "--deadline", "1.5s", "--json")
    assert drained.json() == {"accepted": True, "message": "fanout:f1: succeeded", "drained_targets": 1,
                              "drained_instances": ["f1"]}
    request = oam.servicer.requests_of("DrainReplication")[0]
    assert (request.schema, request.table, request.drain_deadline_seconds, request.instance_id, request.force) == (
        "public", "users", 2, "f1", False)
    drained = await laredo(oam, "drain", "--instance", "f1", "--force")
    assert drained.out == ("drain of instance f1: accepted\n  fanout:f1: succeeded\n"
                           "  fan-out instances drained: f1\n"), drained
    request = oam.servicer.requests_of("DrainReplication")[1]
    assert (request.table, request.instance_id, request.force) == ("", "f1", True)


async def test_reset_prints_only_the_details_instances_gave(oam: FakeOamServer) -> None:
    answer = oam_pb2.ResetSourceResponse(accepted=True, message="ingest:pg: succeeded (slot reset)")
    answer.details.update({"host": {}, "other": {"slot": "laredo_pg"}})
    oam.servicer.responses["ResetSource"] = answer
    result = await laredo(oam, "reset", "pg", "--yes")
    assert (result.code, result.out) == (0, "reset of source pg: accepted\n  ingest:pg: succeeded (slot reset)\n"
                                            '  other: {"slot":"laredo_pg"}\n'), result


async def test_status_lists_long_work_in_progress_and_watch_redraws_it(oam: FakeOamServer) -> None:
    status = oam_pb2.GetStatusResponse(state=oam_pb2.SERVICE_STATE_BASELINING)
    source = status.sources.add(source_id="pg", source_type="postgresql")
    source.source_details.update({"phase": "baseline", "baseline": {
        "running": True, "table": "public.users", "rows": 300, "expected_rows": 1200, "rows_per_second": 100.0,
        "eta_seconds": 9.0}})
    oam.servicer.responses["GetStatus"] = status
    instances = oam_pb2.ListInstancesResponse()
    restore = instances.instances.add(service="query", instance_id="q1")
    restore.status.update({"replays": {"r1": {"kind": "restore", "table": "public.users", "state": "running",
                                              "phase": "loading", "rows_replayed": 0}}})
    oam.servicer.responses["ListInstances"] = instances
    shown = await laredo(oam, "status")
    assert shown.code == 0, shown
    assert shown.out.splitlines()[-3:] == [
        "IN PROGRESS",
        "baseline   public.users (source pg)  [######..................]  25%  300/1,200 rows, 100 rows/s, ETA 9s",
        "restore    public.users on query q1  [#####...................]  20%  loading (2/6)",
    ]
    watched = await laredo(oam, "status", "--watch", "0.2", "--timeout", "1", "--json")
    assert watched.code == 0, watched
    frames = [line for line in watched.out.splitlines() if line]
    assert len(frames) >= 2 and all('"in_progress":[{"kind":"baseline"' in frame for frame in frames)

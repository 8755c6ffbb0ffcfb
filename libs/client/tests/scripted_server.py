"""A real grpc.aio Replication server on a free port whose Sync calls play scripted message sequences.

The client library's contract is the wire protocol, so its tests drive it with exact sequences: handshake
modes, snapshots, entries, heartbeats, GoAway, silence, gaps, errors and clean ends. Each Sync call takes the
next queued script (waiting for one if none is queued); one server can play several "instances" in turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import struct_pb2

from laredo.replication.v1 import replication_pb2 as pb

SERVICE = pb.DESCRIPTOR.services_by_name["TableSyncReplication"].full_name
COLUMNS = (
    pb.ColumnDefinition(ordinal_position=1, column_name="id", data_type="int4", not_null=True,
                        is_primary_key=True, primary_key_ordinal=1),
    pb.ColumnDefinition(ordinal_position=2, column_name="name", data_type="text"),
    pb.ColumnDefinition(ordinal_position=3, column_name="team", data_type="text"),
)


@dataclass(frozen=True)
class Abort:
    """End the call with this status."""

    code: grpc.StatusCode
    details: str = "scripted failure"


@dataclass(frozen=True)
class Pause:
    """Wait this many seconds before the next step (the server's pacing, e.g. between heartbeats)."""

    seconds: float


@dataclass(frozen=True)
class Mark:
    """Set this event when the script reaches this step (lets a test know how far the server got)."""

    event: asyncio.Event


def hold() -> asyncio.Event:
    """A step that blocks forever (until the client goes away): silence."""
    return asyncio.Event()


@dataclass
class Script:
    """What one Sync call does, and what the test can observe about it."""

    steps: list[Any]
    metadata: tuple[tuple[str, str], ...] = ()
    request: pb.SyncRequest | None = None
    received_metadata: dict[str, str] = field(default_factory=dict)  # what the client sent with the call
    started: asyncio.Event = field(default_factory=asyncio.Event)
    done_steps: asyncio.Event = field(default_factory=asyncio.Event)  # every step was played
    closed_by_client: asyncio.Event = field(default_factory=asyncio.Event)
    finished: asyncio.Event = field(default_factory=asyncio.Event)


class ScriptedReplicationServer:
    def __init__(self) -> None:
        self._queue: asyncio.Queue[Script] = asyncio.Queue()
        self.calls: list[Script] = []
        self._server: grpc.aio.Server | None = None
        self.port = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self, credentials: grpc.ServerCredentials | None = None) -> None:
        """Listen on a free port: cleartext, or TLS with `credentials`."""
        self._server = grpc.aio.server()
        handler = grpc.unary_stream_rpc_method_handler(
            self._sync, request_deserializer=pb.SyncRequest.FromString,
            response_serializer=pb.SyncResponse.SerializeToString)
        self._server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, {"Sync": handler})])
        if credentials is None:
            self.port = self._server.add_insecure_port("127.0.0.1:0")
        else:
            self.port = self._server.add_secure_port("127.0.0.1:0", credentials)
        await self._server.start()

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(grace=None)

    def serve(self, *steps: Any) -> Script:
        """Queue a script for the next Sync call. Steps: SyncResponse messages (or lists of them), Events
        (wait until set), Mark, Pause, Abort; after the last step the server ends the stream cleanly."""
        flat: list[Any] = []
        for step in steps:
            flat.extend(step if isinstance(step, list) else [step])
        script = Script(flat)
        self._queue.put_nowait(script)
        return script

    async def _sync(self, request: pb.SyncRequest, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        script = await self._queue.get()
        script.request = request
        script.received_metadata = {key: value for key, value in context.invocation_metadata() or ()
                                    if isinstance(value, str)}
        self.calls.append(script)
        script.started.set()
        try:
            if script.metadata:
                await context.send_initial_metadata(script.metadata)
            for step in script.steps:
                if isinstance(step, pb.SyncResponse):
                    yield step
                elif isinstance(step, asyncio.Event):
                    await step.wait()
                elif isinstance(step, Mark):
                    step.event.set()
                elif isinstance(step, Pause):
                    await asyncio.sleep(step.seconds)
                elif isinstance(step, Abort):
                    script.done_steps.set()
                    await context.abort(step.code, step.details)
            script.done_steps.set()
        except (asyncio.CancelledError, GeneratorExit):  # GeneratorExit: cancelled while between two steps
            script.closed_by_client.set()
            raise
        finally:
            script.finished.set()


# -- message builders -----------------------------------------------------------------------------------------

def pos(n: int) -> str:
    """A source position (bare LSN) that grows with n."""
    return f"0/{0x1000 + n:X}"


def row(i: int, name: str | None = None, team: str = "a") -> dict[str, Any]:
    return {"id": i, "name": name if name is not None else f"n{i}", "team": team}


def struct(values: Mapping[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(dict(values))
    return out


def handshake(mode: str, *, current: int, resume: int, columns: Sequence[pb.ColumnDefinition] = COLUMNS,
              snapshot_id: str = "", oldest: int = 1, instance: str = "", epoch: str = "") -> pb.SyncResponse:
    """`instance` and `epoch`: the server names the journal that numbers its sequences (an extension)."""
    return pb.SyncResponse(handshake=pb.SyncHandshake(
        mode=pb.SyncMode.Value(f"SYNC_MODE_{mode}"), server_current_sequence=current, resume_from_sequence=resume,
        journal_oldest_sequence=oldest, columns=list(columns), snapshot_id=snapshot_id, instance_id=instance,
        journal_epoch=epoch))


def snapshot(rows: Iterable[Mapping[str, Any]], *, sequence: int, position: str, snapshot_id: str = "snap-1",
             batch: int = 0) -> list[pb.SyncResponse]:
    rows = list(rows)
    begin = pb.SyncResponse(snapshot_begin=pb.SnapshotBegin(snapshot_id=snapshot_id, sequence=sequence,
                                                            row_count=len(rows), source_position=position))
    if batch > 1:
        body = [pb.SyncResponse(snapshot_rows=pb.SnapshotRowBatch(
            rows=[pb.SnapshotRow(row=struct(r)) for r in rows[i:i + batch]])) for i in range(0, len(rows), batch)]
    else:
        body = [pb.SyncResponse(snapshot_row=pb.SnapshotRow(row=struct(r))) for r in rows]
    end = pb.SyncResponse(snapshot_end=pb.SnapshotEnd(sequence=sequence, rows_sent=len(rows),
                                                      source_position=position))
    return [begin, *body, end]


def journal_entry(sequence: int, position: str, action: str, *, old: Mapping[str, Any] | None = None,
                  new: Mapping[str, Any] | None = None) -> pb.ReplicationJournalEntry:
    message = pb.ReplicationJournalEntry(sequence=sequence, source_position=position, action=action)
    if old is not None:
        message.old_values.CopyFrom(struct(old))
    if new is not None:
        message.new_values.CopyFrom(struct(new))
    return message


def entry(sequence: int, position: str, action: str, **values: Any) -> pb.SyncResponse:
    return pb.SyncResponse(journal_entry=journal_entry(sequence, position, action, **values))


def batch(*entries: pb.SyncResponse) -> pb.SyncResponse:
    return pb.SyncResponse(journal_batch=pb.JournalEntryBatch(entries=[e.journal_entry for e in entries]))


def heartbeat(current: int) -> pb.SyncResponse:
    return pb.SyncResponse(heartbeat=pb.Heartbeat(current_sequence=current))


def go_away(reason: str = "draining", deadline_ms: int = 0) -> pb.SyncResponse:
    return pb.SyncResponse(go_away=pb.GoAway(reason=reason, drain_deadline_unix_ms=deadline_ms))

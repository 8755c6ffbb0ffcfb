"""Integration helpers: a JetStream stream for one test, and fan-out instances (FanoutApp) on real ports."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from laredo_testing.eventually import eventually

from laredo.replication.v1 import replication_pb2 as rpb
from laredo.replication.v1 import replication_pb2_grpc as rpb_grpc
from laredo_core.config import load_settings
from laredo_core.stream import naming
from laredo_fanout.main import FanoutApp, build
from services.fanout.tests.fanout_testkit import SOURCE, TABLE, SyncReplica

NO_WINDOW_GROWTH = [("grpc.http2.bdp_probe", 0)]  # a client that stops reading stops the server after ~64 KiB
#: The front door's window towards the service at its smallest: tests of what the fan-out does with a client that
#: stops reading count on how little its transport holds. At the default (1 MiB) the door takes up to that much
#: more from the service for such a client before the fan-out's client_buffer sees it fall behind.
SMALL_DOOR_WINDOW = "front_door { limits { stream_window_bytes = 64KiB } }"


@dataclass
class Stream:
    """The JetStream stream of one test; publish() returns each message's stream sequence."""

    js: Any
    prefix: str

    async def publish(self, *messages: bytes | list[bytes]) -> list[int]:
        subject = naming.table_subject(self.prefix, SOURCE, TABLE)
        sequences = []
        for message in messages:
            for data in message if isinstance(message, list) else [message]:
                sequences.append((await self.js.publish(subject, data)).seq)
        return sequences


def config_text(nats_url: str, prefix: str, target: str = "", fanout: str = "", door: str = "") -> str:
    return f"""{door}
sources {{ {SOURCE} {{ type = postgresql, connection = "host=127.0.0.1 dbname=unused" }} }}
tables = [ {{ source = {SOURCE}, schema = {TABLE.schema}, table = {TABLE.name}, targets = [ {{
  type = replication-fanout
  heartbeat_interval = 200ms
  {target}
}} ] }} ]
stream {{ nats_url = "{nats_url}", subject_prefix = {prefix} }}
fanout {{ grpc {{ host = 127.0.0.1, port = 0 }}, health_host = 127.0.0.1, health_port = 0 {fanout} }}
"""


@dataclass
class Instance:
    app: FanoutApp
    channel: grpc.aio.Channel
    stop: asyncio.Event
    task: asyncio.Task[None]
    channels: list[grpc.aio.Channel] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.app.grpc_port}"

    @property
    def stub(self) -> rpb_grpc.TableSyncReplicationStub:
        return rpb_grpc.TableSyncReplicationStub(self.channel)

    def new_channel(self, options: list[tuple[str, Any]] | None = None) -> grpc.aio.Channel:
        channel = grpc.aio.insecure_channel(self.address, options=options)
        self.channels.append(channel)
        return channel

    async def status(self) -> rpb.GetReplicationStatusResponse:
        return await self.stub.GetReplicationStatus(rpb.GetReplicationStatusRequest(schema=TABLE.schema,
                                                                                    table=TABLE.name))

    async def shutdown(self) -> None:
        for channel in (self.channel, *self.channels):
            await channel.close()
        self.stop.set()
        await asyncio.wait_for(self.task, 30)


@asynccontextmanager
async def fanout_instance(tmp_path: Path, nats_url: str, prefix: str, *, target: str = "", fanout: str = "",
                          door: str = "", name: str = "fanout", **overrides: Any) -> AsyncIterator[Instance]:
    path = tmp_path / f"{name}.conf"
    path.write_text(config_text(nats_url, prefix, target, fanout, door))
    app = build(load_settings(path, env={}), **overrides)
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    await eventually(lambda: app.started.is_set() or task.done(), what=f"{name} to start")
    if task.done():
        task.result()
    instance = Instance(app, grpc.aio.insecure_channel(f"127.0.0.1:{app.grpc_port}"), stop, task)
    try:
        yield instance
    finally:
        if not task.done():
            await instance.shutdown()


@dataclass
class Follower:
    """A Sync call applied to a SyncReplica in the background; `error` is what ended it, if anything."""

    replica: SyncReplica
    call: Any
    task: asyncio.Task[None]
    error: BaseException | None = None

    def cancel(self) -> None:
        self.call.cancel()


def follow(channel: grpc.aio.Channel, *, gaps_allowed: bool = False, track_rows: bool = True,
           on_message: Callable[[rpb.SyncResponse], None] | None = None, **request: Any) -> Follower:
    call = rpb_grpc.TableSyncReplicationStub(channel).Sync(
        rpb.SyncRequest(schema=TABLE.schema, table=TABLE.name, **request))
    replica = SyncReplica(gaps_allowed=gaps_allowed, track_rows=track_rows)
    follower = Follower(replica, call, asyncio.ensure_future(asyncio.sleep(0)))

    async def run() -> None:
        try:
            async for message in call:
                replica.apply(message)
                if on_message is not None:
                    on_message(message)
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                follower.error = exc
        except asyncio.CancelledError:
            if not call.cancelled():  # the call was cancelled by the test: a normal end
                raise

    follower.task = asyncio.create_task(run())
    return follower


async def stream_fixture(nats_url: str, prefix: str) -> AsyncIterator[Stream]:
    import nats

    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    stream = naming.stream_name(prefix, SOURCE)
    await js.add_stream(name=stream, subjects=[naming.source_subject_filter(prefix, SOURCE)])
    try:
        yield Stream(js, prefix)
    finally:
        await js.delete_stream(stream)
        await nc.close()

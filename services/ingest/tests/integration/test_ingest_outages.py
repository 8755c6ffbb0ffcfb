"""NATS going away and coming back: nothing is confirmed meanwhile, nothing is lost afterwards."""

from __future__ import annotations

import nats
import pytest

from laredo_kernel.changes import BatchKind
from laredo_core.stream.codec import decode_batch
from laredo_core.stream.naming import stream_name
from laredo_testing.eventually import eventually
from laredo_testing.servers import NatsServer

pytestmark = pytest.mark.integration


async def test_a_nats_outage_pauses_confirmation_and_streaming_resumes(pg, ingest_settings, make_app, start_app,
                                                                      unique_name) -> None:
    await pg.execute("CREATE TABLE items (id int PRIMARY KEY, name text)")
    with NatsServer() as server:
        running = start_app(make_app(ingest_settings(nats=server.url), ack_timeout=1.0))
        await eventually(lambda: running.app.status.ready, timeout=30, what="ingest ready")
        confirmed = running.app.confirmed_lsn
        server.stop()
        await pg.execute("INSERT INTO items VALUES (1, 'during the outage')")
        await eventually(lambda: running.app.status.restarts >= 1, timeout=30, what="a restart during the outage")
        assert running.app.confirmed_lsn == confirmed
        server.start()
        await eventually(lambda: running.app.status.ready and running.app.confirmed_lsn > confirmed, timeout=60,
                         what="streaming again and the outage's change confirmed")
        client = await nats.connect(server.url)
        try:
            js = client.jetstream()
            name = stream_name(unique_name, "main")
            info = await js.stream_info(name)
            batches = [decode_batch((await js.get_msg(name, seq)).data or b"")
                       for seq in range(info.state.first_seq, info.state.last_seq + 1)]
        finally:
            await client.close()
        rows = [c.new for b in batches if b.kind is BatchKind.TRANSACTION for c in b.changes]
        assert rows == [{"id": 1, "name": "during the outage"}]
        await running.stop_cleanly()

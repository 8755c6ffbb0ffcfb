"""A publish lost on the wire is never overtaken: the stream holds every transaction once, in commit order.

The NATS connection of ingest goes through a FaultProxy that discards the next bytes ingest writes and aborts
the connection while transactions are being published. nats-py reconnects and sends what it buffered since;
JetStream must refuse those (their predecessor never arrived), and the next session re-publishes from the
first unacknowledged transaction. Without that, the lost transaction lands after later ones and every
consumer skips it as a replay.
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import psycopg
import pytest

from laredo_core.changes import BatchKind, TableId
from laredo_testing.eventually import eventually
from laredo_testing.fault_proxy import FaultProxy

from services.ingest.tests.stream_replica import assert_replica_equals_table, read_stream

pytestmark = pytest.mark.integration

ITEMS = TableId("public", "items")
TRANSACTIONS = 400


async def test_a_publish_lost_on_the_wire_is_never_overtaken(pg_dsn, ingest_settings, make_app, start_app, nats_url,
                                                            unique_name) -> None:
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await conn.execute("CREATE TABLE items (id int PRIMARY KEY, name text)")
        await conn.execute("INSERT INTO items SELECT i, 'row ' || i FROM generate_series(1, 10) i")
    nats_address = urlsplit(nats_url).netloc
    with FaultProxy(nats_address, name="ingest-to-nats") as proxy:
        app = make_app(ingest_settings(nats=f"nats://{proxy.address}"), ack_timeout=3.0)
        running = start_app(app)
        await eventually(lambda: app.status.ready, timeout=30, what="baseline done")

        async def write() -> None:
            async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
                for i in range(TRANSACTIONS):
                    if i == TRANSACTIONS // 4:
                        proxy.drop_next_upstream()  # while ingest publishes: a write of it is lost
                    await conn.execute("INSERT INTO items VALUES (%s, %s)", (1000 + i, f"tx {i}"))
                    await asyncio.sleep(0.002)

        await write()
        assert not proxy.dropping, "the proxy dropped a write of ingest"
        last_id = 1000 + TRANSACTIONS - 1
        await eventually(lambda: _has_item(nats_url, unique_name, last_id), timeout=60,
                         what="the last transaction in the stream")
        messages = await read_stream(nats_url, unique_name)
        commits = [m.batch.commit_lsn for m in messages if m.batch.kind is BatchKind.TRANSACTION]
        assert commits == sorted(commits), "a transaction was stored after a later one"
        assert len(commits) == len(set(commits)) == TRANSACTIONS, "every transaction once"
        await assert_replica_equals_table(nats_url, unique_name, pg_dsn, ITEMS)
        assert app.status.restarts >= 1, "the lost publish failed the session, which started again"
        await running.stop_cleanly()


async def _has_item(nats_url: str, prefix: str, item_id: int) -> bool:
    return any(c.new and c.new.get("id") == item_id for m in await read_stream(nats_url, prefix)
               for c in m.batch.changes)

"""A publish lost on the wire is never overtaken: the stream holds every transaction once, in commit order.

The NATS connection of ingest goes through a FaultProxy that discards the next bytes ingest writes and aborts
the connection while transactions are being published. nats-py reconnects and sends what it buffered since;
JetStream must refuse those (their predecessor never arrived), and the next session re-publishes from the
first unacknowledged transaction. Without that, the lost transaction lands after later ones and every
consumer skips it as a replay.
"""

from __future__ import annotations

import asyncio
import dataclasses
from urllib.parse import urlsplit

import nats
import psycopg
import pytest

from laredo_kernel.changes import Action, BatchKind, TableId
from laredo_kernel.position import format_lsn
from laredo_core.stream.naming import source_subject_filter, stream_name, table_subject
from laredo_kernel.tuples import encode_tuple
from laredo_testing.eventually import eventually
from laredo_testing.fault_proxy import FaultProxy

from laredo_ingest.adapters.nats_change_publisher import NatsChangePublisher
from laredo_ingest.adapters.nats_connection import NatsConnection
from laredo_ingest.domain.batches import ChangeRecord, OutboundBatch
from laredo_ingest.ports import StreamSpec
from services.ingest.tests.contract.test_ingest_publisher_contract import SCHEMA, Acks
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


async def test_a_change_stored_ahead_of_a_lost_one_is_replaced_by_a_new_baseline(
        pg_dsn, ingest_settings, make_app, start_app, nats_url, unique_name) -> None:
    """Another client writes to the stream while ingest's next two transactions are on their way: its message
    takes the sequence the first one names for itself, so that one is refused and the second is stored ahead
    of it. Ingest finds that at its next start and takes a new baseline (RESYNC_REQUIRED first) instead of
    re-sending the first behind the second, which every consumer would skip as a replay."""
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await conn.execute("CREATE TABLE items (id int PRIMARY KEY, name text)")
        await conn.execute("INSERT INTO items SELECT i, 'row ' || i FROM generate_series(1, 10) i")
    with FaultProxy(urlsplit(nats_url).netloc, name="ingest-to-nats") as proxy:
        app = make_app(ingest_settings(nats=f"nats://{proxy.address}"), ack_timeout=10.0)
        running = start_app(app)
        await eventually(lambda: app.status.ready, timeout=30, what="baseline done")
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            await conn.execute("INSERT INTO items VALUES (100, 'stored')")
            await eventually(lambda: _has_item(nats_url, unique_name, 100), what="a transaction stored")
            changes = app.status.changes
            proxy.hold_upstream()
            await conn.execute("INSERT INTO items VALUES (101, 'lost')")
            await conn.execute("INSERT INTO items VALUES (102, 'ahead')")
            await eventually(lambda: app.status.changes == changes + 2 and proxy.held_chunks >= 1,
                             what="both transactions sent, held on the way")
            await asyncio.sleep(0.2)  # ingest's writes leave within a millisecond
        writer = await nats.connect(nats_url)
        await writer.jetstream().publish(table_subject(unique_name, "main", ITEMS), b"\xff\x00 not a batch")
        await writer.close()
        proxy.release_upstream()
        await eventually(lambda: _resyncs(nats_url, unique_name), timeout=60, what="a RESYNC_REQUIRED")
        [resync] = await _resyncs(nats_url, unique_name)
        assert "did not publish" in resync.reason and "new baseline" in resync.reason, resync.reason
        await eventually(lambda: app.status.ready, timeout=30, what="the new baseline done")
        messages = await read_stream(nats_url, unique_name)
        lost = [m for m in messages if m.batch.kind is BatchKind.TRANSACTION
                and any(c.new and c.new.get("id") == 101 for c in m.batch.changes)]
        assert not lost, "the lost transaction was re-sent behind its successor"
        await assert_replica_equals_table(nats_url, unique_name, pg_dsn, ITEMS)
        await running.stop_cleanly()


async def _resyncs(nats_url: str, prefix: str) -> list:
    return [m.batch for m in await read_stream(nats_url, prefix) if m.batch.kind is BatchKind.RESYNC_REQUIRED]


async def _has_item(nats_url: str, prefix: str, item_id: int) -> bool:
    return any(c.new and c.new.get("id") == item_id for m in await read_stream(nats_url, prefix)
               for c in m.batch.changes)


async def test_on_a_replicated_stream_a_refused_message_leaves_the_stream_healthy(nats_cluster, unique_name) -> None:
    """Three replicas: a message refused because its predecessor never arrived is refused before it is
    replicated, so the stream keeps taking messages (expected message ids would stop it on every node)."""
    connection = NatsConnection(list(nats_cluster.urls))
    publisher = NatsChangePublisher(connection, max_pending=8, ack_timeout=10.0)
    spec = StreamSpec(stream_name(unique_name, "src"), (source_subject_filter(unique_name, "src"),), 120.0, 0.0,
                      -1, 3)
    batches = [_batch(unique_name, 0x1000 + i * 0x100) for i in range(5)]
    await publisher.ensure_stream(spec)
    first = Acks()
    await publisher.publish(batches[0], first.callback("0"))
    await publisher.publish(dataclasses.replace(batches[1], subject=f"{unique_name}-nowhere.x"), first.callback("1"))
    for i in (2, 3):
        await publisher.publish(batches[i], first.callback(str(i)))
    await eventually(lambda: len(first.results) == 4, what="every message answered")
    assert first.results["0"] == [None] and all(first.results[str(i)][0] is not None for i in (1, 2, 3))

    await publisher.ensure_stream(spec)  # the next session: the stored one is a duplicate, the rest follow
    again = Acks()
    for b in batches:
        await publisher.publish(b, again.callback(b.msg_id))
    assert await publisher.wait_for_acks(30.0)
    assert again.results == {b.msg_id: [None] for b in batches}
    state = nats_cluster.wait_stream_replicated(spec.name, 3)
    assert state["messages"] == 5, state
    await publisher.close()
    await connection.close()


def _batch(prefix: str, commit_lsn: int) -> OutboundBatch:
    return OutboundBatch(subject=table_subject(prefix, "src", SCHEMA.table),
                         msg_id=f"src:tx:{format_lsn(commit_lsn)}:public.users:0", source_id="src",
                         kind=BatchKind.TRANSACTION, schema=SCHEMA, commit_lsn=commit_lsn, end_lsn=commit_lsn + 0x80,
                         xid=7, last_chunk=True,
                         changes=[ChangeRecord(Action.INSERT, 0, b"", encode_tuple([b"1", b"x"]))])

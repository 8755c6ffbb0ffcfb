"""Query start-up from a snapshot on real NATS JetStream and S3 (moto): the snapshot plus only the stream tail."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import nats
import pytest
from laredo_testing.eventually import eventually
from laredo_testing.servers import S3Endpoint

from laredo_core.config import load_settings
from laredo_core.snapshots.format import SnapshotManifest
from laredo_core.snapshots.s3_store import S3Location, S3SnapshotStore
from laredo_core.stream import naming
from laredo_core.stream.feed import ChangeSink, FeedSubscription
from laredo_core.stream.nats_feed import NatsChangeFeed
from laredo_query.application.query_table import QueryTable
from laredo_query.main import QueryApp, build
from services.query.tests.query_testkit import SOURCE, TABLE, Batches, row
from services.query.tests.snapshot_testkit import SNAPSHOT_SERVICE, store_snapshot

pytestmark = pytest.mark.integration


class RecordingNatsFeed(NatsChangeFeed):
    """The JetStream feed, remembering the subscriptions it serves (where each table starts)."""

    subscriptions: list[FeedSubscription]

    async def run(self, subscriptions: Sequence[FeedSubscription], sink: ChangeSink) -> None:
        self.subscriptions = list(subscriptions)
        await super().run(subscriptions, sink)


def config_text(nats_url: str, prefix: str, s3: S3Endpoint | None, bucket: str) -> str:
    snapshot = "" if s3 is None else f"""snapshot {{ store = s3, store_config {{ endpoint = "{s3.url}",
      bucket = {bucket}, prefix = snaps, access_key = {s3.access_key}, secret_key = {s3.secret_key},
      region = {s3.region} }} }}"""
    return f"""
sources {{ {SOURCE} {{ type = postgresql, connection = "host=127.0.0.1 dbname=unused" }} }}
tables = [ {{ source = {SOURCE}, schema = {TABLE.schema}, table = {TABLE.name}, targets = [ {{
  type = indexed-memory, lookup_fields = [email], indexes = [ {{ name = by_status, fields = [status] }} ]
  {snapshot}
}} ] }} ]
stream {{ nats_url = "{nats_url}", subject_prefix = {prefix} }}
query {{ grpc {{ host = 127.0.0.1, port = 0 }}, health_host = 127.0.0.1, health_port = 0, drain_grace = 100ms }}
"""


@asynccontextmanager
async def query_app(tmp_path: Path, name: str, nats_url: str, prefix: str, s3: S3Endpoint | None = None,
                    bucket: str = "") -> AsyncIterator[tuple[QueryApp, RecordingNatsFeed]]:
    path = tmp_path / f"{name}.conf"
    path.write_text(config_text(nats_url, prefix, s3, bucket))
    feed = RecordingNatsFeed([nats_url], prefix, json_values=True, client_name=name)
    app = build(load_settings(path, env={}), feed=feed)
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    await eventually(lambda: app.started.is_set() or task.done(), what=f"{name} to start")
    if task.done():
        task.result()
    try:
        yield app, feed
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


@pytest.fixture
async def js(nats_url: str, unique_name: str) -> AsyncIterator[Any]:
    nc = await nats.connect(nats_url)
    stream = naming.stream_name(unique_name, SOURCE)
    await nc.jetstream().add_stream(name=stream, subjects=[naming.source_subject_filter(unique_name, SOURCE)])
    try:
        yield nc.jetstream()
    finally:
        await nc.jetstream().delete_stream(stream)
        await nc.close()


async def publish(js: Any, prefix: str, *messages: bytes | list[bytes]) -> int:
    sequence = 0
    for message in messages:
        for data in message if isinstance(message, list) else [message]:
            sequence = (await js.publish(naming.table_subject(prefix, SOURCE, TABLE), data)).seq
    return sequence


def rows_of(table: QueryTable) -> dict[Any, dict[str, Any]]:
    return {r.values["id"]: r.values for r in table.indexed.rows()}


async def snapshot_of(store: S3SnapshotStore, table: QueryTable, sequence: int, created_at: float
                      ) -> SnapshotManifest:
    """What the snapshot service writes for `table` as it stands at stream sequence `sequence`."""
    return await store_snapshot(store, TABLE, table.indexed.columns, [r.values for r in table.indexed.rows()],
                                position=str(table.applied_position), stream_sequence=sequence,
                                created_at=created_at, part_rows=40)


async def test_a_started_query_service_loads_the_snapshot_and_applies_only_the_tail(
        js: Any, nats_url: str, unique_name: str, s3_endpoint: S3Endpoint, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    b, prefix = Batches(), unique_name
    store = S3SnapshotStore(S3Location(s3_endpoint.endpoint, unique_name, "snaps", s3_endpoint.access_key,
                                       s3_endpoint.secret_key, s3_endpoint.region, secure=False))
    first_end = await publish(js, prefix, b.baseline([row(i, qty=i) for i in range(1, 201)], chunk_rows=50),
                              b.transaction(b.update(row(1, "paid")), b.delete({"id": 2})))
    async with query_app(tmp_path, "writer", nats_url, prefix) as (writer, _):
        live, sink = writer.service.tables[0], writer.sink
        assert sink is not None
        await eventually(lambda: live.ready and sink.applied_sequence(TABLE) == first_end,
                         what="the writer applied the first part of the stream")
        older = await snapshot_of(store, live, first_end, 1_700_000_000.0)
        second_end = await publish(js, prefix, b.transaction(b.insert(row(300, "new")), b.update(row(3, "paid"))))
        await eventually(lambda: sink.applied_sequence(TABLE) == second_end,
                         what="the writer applied the second part")
        newest = await snapshot_of(store, live, second_end, 1_700_000_100.0)
        tail_end = await publish(js, prefix, b.transaction(b.delete({"id": 4}), b.insert(row(301))),
                                 b.transaction(b.update(row(300, "shipped"))))
        await eventually(lambda: sink.applied_sequence(TABLE) == tail_end,
                         what="the writer applied the tail")
        assert newest.producer == SNAPSHOT_SERVICE and older.stream_sequence < newest.stream_sequence < tail_end

        async with query_app(tmp_path, "restored", nats_url, prefix, s3_endpoint, unique_name) as (app, feed):
            table = app.service.tables[0]
            await eventually(lambda: table.ready, what="the restored instance ready")
            assert feed.subscriptions == [FeedSubscription(SOURCE, TABLE, newest.stream_sequence)]
            assert app.sink is not None and app.sink.applied_sequence(TABLE) == tail_end
            assert rows_of(table) == rows_of(live) and len(rows_of(table)) == 200
            assert [r.values["id"] for r in table.indexed.lookup("by_status", ["paid"])] == [1, 3]

        await store.write_part(TABLE, newest.snapshot_id, "rows-00001.jsonl", b'{"id":1}\n')  # damaged
        with caplog.at_level(logging.WARNING, logger="laredo_query"):
            async with query_app(tmp_path, "fallback", nats_url, prefix, s3_endpoint, unique_name) as (app, feed):
                table = app.service.tables[0]
                await eventually(lambda: table.ready, what="the instance restored from the older snapshot")
                assert feed.subscriptions == [FeedSubscription(SOURCE, TABLE, older.stream_sequence)]
                assert rows_of(table) == rows_of(live)
        assert f"snapshot {newest.snapshot_id} not used" in caplog.text
        assert "does not match its manifest" in caplog.text

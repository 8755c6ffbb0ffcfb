"""Fixtures for ingest integration tests: settings for one test's database and stream, a stream reader."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
import psycopg
import pytest

from laredo_kernel.changes import ChangeBatchInfo
from laredo_core.config import LaredoSettings, load_settings
from laredo_core.stream.codec import decode_batch
from laredo_core.stream.naming import stream_name


@dataclass(frozen=True)
class StoredMessage:
    seq: int
    headers: dict[str, str]
    batch: ChangeBatchInfo


SettingsFactory = Callable[..., LaredoSettings]


@pytest.fixture
def ingest_settings(tmp_path: Path, pg_dsn: str, nats_url: str, unique_name: str) -> SettingsFactory:
    """Settings for one source `main` reading table public.items of this test's database; keyword
    arguments override the source's connection or the NATS URL, or add HOCON lines."""

    def make(*, connection: str | None = None, tables: tuple[str, ...] = ("items",), extra: str = "",
             nats: str | None = None) -> LaredoSettings:
        table_list = ", ".join(
            f'{{ source = main, schema = public, table = {t}, targets = [{{ type = replication-fanout }}] }}'
            for t in tables)
        text = f"""
        sources {{
          main {{
            type = postgresql
            connection = {json.dumps(connection or pg_dsn)}
            slot_name = {unique_name}
            status_interval = 500ms
            publication {{ name = {unique_name}_pub }}
            baseline {{ chunk_rows = 64 }}
            reconnect {{ initial_backoff = 100ms, max_backoff = 500ms }}
          }}
        }}
        tables = [ {table_list} ]
        stream {{ nats_url = "{nats or nats_url}", subject_prefix = {unique_name}, max_batch_changes = 100 }}
        ingest {{ health_host = 127.0.0.1, health_port = 0 }}
        {extra}
        """
        path = tmp_path / f"laredo-{len(list(tmp_path.iterdir()))}.conf"
        path.write_text(text)
        return load_settings(path, env={})

    return make


@pytest.fixture
def make_app(ingest_settings: SettingsFactory, unique_name: str) -> Callable[..., Any]:
    """build() with this test's settings and its own state bucket."""
    from laredo_ingest.main import build

    def make(settings: LaredoSettings | None = None, **overrides: Any) -> Any:
        return build(settings or ingest_settings(), state_bucket=f"{unique_name}_state", **overrides)

    return make


@pytest.fixture
async def pg(pg_dsn: str) -> AsyncIterator[psycopg.AsyncConnection]:
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture
async def read_stream(nats_url: str, unique_name: str) -> AsyncIterator[Callable[[], Awaitable[list[StoredMessage]]]]:
    """Every message of the test's stream, in stream order, decoded."""
    client = await nats.connect(nats_url)
    js = client.jetstream()

    async def read() -> list[StoredMessage]:
        name = stream_name(unique_name, "main")
        info = await js.stream_info(name)
        messages = []
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            raw = await js.get_msg(name, seq)
            messages.append(StoredMessage(seq, dict(raw.headers or {}), decode_batch(raw.data or b"")))
        return messages

    yield read
    await client.close()


@dataclass
class RunningApp:
    app: Any
    stop: asyncio.Event
    task: asyncio.Task

    async def stop_cleanly(self) -> None:
        self.stop.set()
        await asyncio.wait_for(self.task, 30)

    async def kill(self) -> None:
        """Cancel the run: no final confirmation, no CopyDone (the closest thing to SIGKILL in-process)."""
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


@pytest.fixture
async def start_app() -> AsyncIterator[Callable[[Any], RunningApp]]:
    """Start an IngestApp in a task; anything still running at teardown is stopped."""
    started: list[RunningApp] = []

    def start(app: Any) -> RunningApp:
        stop = asyncio.Event()
        running = RunningApp(app, stop, asyncio.create_task(app.run(stop)))
        started.append(running)
        return running

    yield start
    for running in started:
        if not running.task.done():
            running.stop.set()
            await asyncio.wait([running.task], timeout=30)
        if not running.task.done():
            await running.kill()

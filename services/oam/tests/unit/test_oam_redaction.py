"""OAM answers carry no secret: ListTables' snapshot store keys, instances' errors in GetStatus, error details."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToJson
from laredo.v1 import oam_pb2, oam_pb2_grpc
from laredo_core import redaction
from laredo_core.config import load_settings
from laredo_core.coordination.ports import InstanceStatus
from laredo_core.redaction import REDACTED, Redactor

from laredo_oam.adapters.memory import InMemoryCoordinationStore, MemoryChangeTail
from laredo_oam.entrypoints.grpc.redacted import redacted
from laredo_oam.main import build

SECRETS = ("AKIAOAMUNITTEST01", "oam-secret-key-0123456789", "pg-password-0123", "nats-password-0123",
           "redis-password-0123")
CONFIG = f"""
sources {{ pg {{ type = postgresql, connection = "postgresql://app:{SECRETS[2]}@db:5432/app" }} }}
tables = [ {{ source = pg, table = users, targets = [ {{ type = replication-fanout, snapshot {{ store = s3,
  store_config {{ bucket = snaps, endpoint = "http://minio:9000", access_key = {SECRETS[0]},
                  secret_key = "{SECRETS[1]}" }} }} }} ] }} ]
stream {{ nats_url = "nats://laredo:{SECRETS[3]}@nats:4222" }}
redis {{ url = "redis://:{SECRETS[4]}@redis:6379/0" }}
"""


@pytest.fixture
def secret_settings(tmp_path: Path) -> Iterator[object]:
    path = tmp_path / "laredo.conf"
    path.write_text(CONFIG)
    settings = load_settings(path, env={})
    before = redaction.active()
    redaction.activate(Redactor.from_tree(settings.raw))  # what laredo_core.cli does at start-up
    yield settings
    redaction.activate(before)


@pytest.fixture
async def oam(secret_settings: object) -> AsyncIterator[tuple[oam_pb2_grpc.TableSyncOAMStub, InMemoryCoordinationStore]]:
    store = InMemoryCoordinationStore()
    app = build(secret_settings, store=store, change_tail=MemoryChangeTail(),  # type: ignore[arg-type]
                grpc_host="127.0.0.1", grpc_port=0, health_host="127.0.0.1", health_port=0)
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    await asyncio.wait_for(app.started.wait(), timeout=10)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.grpc_port}") as channel:
        yield oam_pb2_grpc.TableSyncOAMStub(channel), store
    stop.set()
    await asyncio.wait_for(task, timeout=10)


def assert_no_secret(where: str, text: str) -> None:
    leaked = [s for s in SECRETS if s in text]
    assert not leaked, f"{where} contains configured secrets {leaked}:\n{text}"


async def test_list_tables_shows_the_snapshot_store_without_its_keys(oam) -> None:
    stub, _ = oam
    [table] = (await stub.ListTables(oam_pb2.ListTablesRequest(), timeout=5)).tables
    assert_no_secret("ListTables", MessageToJson(table))
    store = table.target_config["snapshot"]["store_config"]
    assert (store["access_key"], store["secret_key"], store["bucket"]) == (REDACTED, REDACTED, "snaps")


async def test_status_rpcs_scrub_what_instances_report(oam) -> None:
    stub, store = oam
    error = (f"cannot connect to NATS at nats://laredo:{SECRETS[3]}@nats:4222: connected to laredo:{SECRETS[3]}@nats "
             f"with {SECRETS[1]}")
    await store.heartbeat(InstanceStatus("ingest", "i1", {
        "source": "pg", "phase": "failed", "last_error": error, "dsn": f"host=db password={SECRETS[2]}"}), ttl=30)
    answers = [
        await stub.GetStatus(oam_pb2.GetStatusRequest(), timeout=5),
        await stub.GetSourceInfo(oam_pb2.GetSourceInfoRequest(source_id="pg"), timeout=5),
        await stub.GetTableStatus(oam_pb2.GetTableStatusRequest(table="users"), timeout=5),
        await stub.CheckReady(oam_pb2.CheckReadyRequest(), timeout=5),
    ]
    for answer in answers:
        assert_no_secret(type(answer).__name__, MessageToJson(answer))
    assert "nats://laredo:***@nats:4222" in MessageToJson(answers[0])


async def test_error_details_are_scrubbed(oam) -> None:
    stub, _ = oam
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.GetTableStatus(oam_pb2.GetTableStatusRequest(table=f"t{SECRETS[1]}"), timeout=5)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert_no_secret("the error details", caught.value.details() or "")


def test_struct_entries_under_secret_names_are_hidden_and_user_data_is_kept() -> None:
    details = struct_pb2.Struct()
    details.update({"Secret_Key": "abc", "nested": {"password": "p", "url": "redis://:pw@r/0"}, "token": "",
                    "list": ["postgresql://u:pw@h/d"]})
    letter = oam_pb2.DeadLetterEntry(error_message="failed at postgresql://u:pw@h/d")
    letter.change_data.update({"password": "a user's row"})
    answer = redacted(oam_pb2.ListDeadLettersResponse(entries=[letter]), Redactor())
    assert answer.entries[0].error_message == "failed at postgresql://u:***@h/d"
    assert answer.entries[0].change_data["password"] == "a user's row"
    shown = redacted(oam_pb2.SourceInfo(details=details), Redactor()).details
    assert shown["Secret_Key"] == REDACTED and shown["token"] == ""
    assert shown["nested"]["password"] == REDACTED and shown["nested"]["url"] == "redis://:***@r/0"
    assert list(shown["list"]) == ["postgresql://u:***@h/d"]

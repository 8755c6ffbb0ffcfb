"""Authentication when grpcio serves the port itself (front_door.enabled = false): the same checks, and a
client-sent x-forwarded-client-cert header is never believed (no door vouches for it)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from laredo.v1 import query_pb2 as qpb
from laredo_core.auth.identity import Role
from laredo_core.auth.settings import AuthSettings, CertificateIdentity, TokenSettings
from laredo_core.frontdoor.settings import FrontDoorSettings
from laredo_core.grpc_server import GrpcServer, start_grpc_server
from laredo_testing.protocols import CallError, Caller

COUNT = "/laredo.v1.TableSyncQuery/CountRows"
TOKEN = "items-token-0123456789abcdef"


async def count_rows(request: qpb.CountRowsRequest, _: Any) -> qpb.CountRowsResponse:
    return qpb.CountRowsResponse(count=len(request.table))


@pytest.fixture
async def server(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[GrpcServer]:
    monkeypatch.setenv("ITEMS_TOKEN", TOKEN)
    auth = AuthSettings(tokens=(TokenSettings("items-app", Role.READ, "env", "ITEMS_TOKEN",
                                              frozenset({"public.items"})),),
                        certificates=(CertificateIdentity("ops", "subject_cn", "ops", Role.ADMIN),))
    handler = grpc.method_handlers_generic_handler("laredo.v1.TableSyncQuery", {
        "CountRows": grpc.unary_unary_rpc_method_handler(
            count_rows, request_deserializer=qpb.CountRowsRequest.FromString,
            response_serializer=qpb.CountRowsResponse.SerializeToString)})
    running = await start_grpc_server("127.0.0.1", 0, (), generic_handlers=[handler],
                                      front_door=FrontDoorSettings(enabled=False, auth=auth), name="test")
    try:
        yield running
    finally:
        await running.stop(None)


async def code_of(server: GrpcServer, request: qpb.CountRowsRequest, headers: dict[str, str]) -> str:
    try:
        response = await Caller(f"127.0.0.1:{server.port}", "grpc", headers=headers, timeout=5).unary(COUNT, request)
    except CallError as exc:
        return exc.code
    return f"OK {response.count}"  # type: ignore[attr-defined]


async def test_tokens_and_tables_are_checked_without_the_door(server: GrpcServer) -> None:
    items, orders = qpb.CountRowsRequest(schema="public", table="items"), qpb.CountRowsRequest(table="orders")
    bearer = {"authorization": f"Bearer {TOKEN}"}
    assert await code_of(server, items, {}) == "UNAUTHENTICATED"
    assert await code_of(server, items, bearer) == "OK 5"
    assert await code_of(server, orders, bearer) == "PERMISSION_DENIED"


async def test_a_client_sent_certificate_header_is_ignored(server: GrpcServer) -> None:
    forged = {"x-forwarded-client-cert": 'Hash=aa;Subject="CN=ops"'}
    assert await code_of(server, qpb.CountRowsRequest(table="items"), forged) == "UNAUTHENTICATED"

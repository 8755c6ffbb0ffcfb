"""Exit codes: the gRPC status map, the messages of failed calls, and the documented table."""

from __future__ import annotations

import grpc
import pytest

from laredo_cli.errors import EXIT_CODE_HELP, ExitCode, exit_code_for, rpc_failure


class FakeRpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


@pytest.mark.parametrize(("status", "exit_code"), [
    (grpc.StatusCode.INVALID_ARGUMENT, 2), (grpc.StatusCode.OUT_OF_RANGE, 2), (grpc.StatusCode.UNAVAILABLE, 3),
    (grpc.StatusCode.NOT_FOUND, 4), (grpc.StatusCode.FAILED_PRECONDITION, 5),
    (grpc.StatusCode.DEADLINE_EXCEEDED, 6), (grpc.StatusCode.UNIMPLEMENTED, 7), (grpc.StatusCode.INTERNAL, 8),
    (grpc.StatusCode.UNKNOWN, 8), (grpc.StatusCode.ABORTED, 8), (grpc.StatusCode.UNAUTHENTICATED, 9),
    (grpc.StatusCode.PERMISSION_DENIED, 10),
    (None, 8),
])
def test_status_codes_map_to_exit_codes(status: grpc.StatusCode | None, exit_code: int) -> None:
    assert exit_code_for(status) == exit_code


def test_every_exit_code_is_documented() -> None:
    documented = {int(line.split()[0]) for line in EXIT_CODE_HELP.splitlines()[1:] if line.split()[0].isdigit()}
    assert documented == {int(code) for code in ExitCode}


@pytest.mark.parametrize("details", ["failed to connect to all addresses",
                                     "errors resolving oam:4001: [address lookup failed]"])
def test_an_unreachable_server_names_the_address_and_how_to_change_it(details: str) -> None:
    error = rpc_failure(FakeRpcError(grpc.StatusCode.UNAVAILABLE, details),
                        "OAM service", "oam:4001", "--server or LAREDO_SERVER")
    assert error.exit_code is ExitCode.UNAVAILABLE
    assert "cannot reach the OAM service at oam:4001" in error.message
    assert "--server or LAREDO_SERVER" in error.message


def test_a_server_error_keeps_the_server_message() -> None:
    error = rpc_failure(FakeRpcError(grpc.StatusCode.NOT_FOUND, "table public.nope is not configured"),
                        "Query service", "q:4003", "--query-server")
    assert error.exit_code is ExitCode.NOT_FOUND
    assert error.message == "Query service at q:4003 answered NOT_FOUND: table public.nope is not configured"


@pytest.mark.parametrize(("status", "hint"), [(grpc.StatusCode.UNIMPLEMENTED, "does not offer this operation"),
                                              (grpc.StatusCode.DEADLINE_EXCEEDED, "raise --timeout")])
def test_hints(status: grpc.StatusCode, hint: str) -> None:
    assert hint in rpc_failure(FakeRpcError(status, "x"), "OAM service", "a:1", "--server").message

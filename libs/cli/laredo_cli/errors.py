"""Exit codes scripts can rely on, and the one map from gRPC status codes to them."""

from __future__ import annotations

import enum

import grpc


class ExitCode(enum.IntEnum):
    """The process exit status of every `laredo` command; EXIT_CODE_HELP says what each means."""

    OK = 0
    REFUSED = 1
    USAGE = 2
    UNAVAILABLE = 3
    NOT_FOUND = 4
    PRECONDITION = 5
    TIMEOUT = 6
    UNIMPLEMENTED = 7
    SERVER_ERROR = 8
    UNAUTHENTICATED = 9
    PERMISSION_DENIED = 10
    TLS = 11
    INTERRUPTED = 130  # 128 + SIGINT


_BY_STATUS: dict[grpc.StatusCode | None, ExitCode] = {
    grpc.StatusCode.INVALID_ARGUMENT: ExitCode.USAGE,
    grpc.StatusCode.OUT_OF_RANGE: ExitCode.USAGE,
    grpc.StatusCode.UNAVAILABLE: ExitCode.UNAVAILABLE,
    grpc.StatusCode.NOT_FOUND: ExitCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION: ExitCode.PRECONDITION,
    grpc.StatusCode.DEADLINE_EXCEEDED: ExitCode.TIMEOUT,
    grpc.StatusCode.UNIMPLEMENTED: ExitCode.UNIMPLEMENTED,
    grpc.StatusCode.UNAUTHENTICATED: ExitCode.UNAUTHENTICATED,
    grpc.StatusCode.PERMISSION_DENIED: ExitCode.PERMISSION_DENIED,
}

#: The exit-code table as `laredo --help` and the README show it: what each ExitCode means.
EXIT_CODE_HELP = """\
exit codes:
  0    success
  1    the server answered no: not accepted, row not found, not ready, not deleted, replay failed
  2    usage error: bad command line, or the server rejected the request (INVALID_ARGUMENT)
  3    unavailable: server unreachable, or not able to answer yet (UNAVAILABLE); retry later
  4    not found: the table, index, source, pipeline, snapshot or replay does not exist (NOT_FOUND)
  5    precondition: not possible in the current state (FAILED_PRECONDITION), or a destructive
       command (reset, snapshots restore/delete/prune, dead-letters purge) without --yes
  6    timeout: no answer within --timeout (DEADLINE_EXCEEDED); a command may still run later
  7    unimplemented: the server does not offer this operation yet (UNIMPLEMENTED)
  8    any other server error (INTERNAL, UNKNOWN, ABORTED, ...)
  9    unauthenticated: a token is required, or the one given was not accepted (UNAUTHENTICATED)
  10   permission denied: the token's role does not allow the command (PERMISSION_DENIED)
  11   TLS: cleartext against a TLS port or the reverse, a server certificate not trusted (--ca)
       or not naming the host, a client certificate missing or refused (--cert, --key)
  130  interrupted (Ctrl-C); watch and subscribe end with 0 instead"""


def exit_code_for(status: grpc.StatusCode | None) -> ExitCode:
    """The exit code of a failed RPC; codes without a meaning of their own are SERVER_ERROR."""
    return _BY_STATUS.get(status, ExitCode.SERVER_ERROR)


class CliError(Exception):
    """A command failed: `message` goes to stderr (prefixed `laredo: `), `exit_code` ends the process."""

    def __init__(self, message: str, exit_code: ExitCode) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class Refused(CliError):
    """The server answered "no" (accepted=false, found=false, ...): exit 1 after the answer was printed."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ExitCode.REFUSED)


def status_of(error: grpc.RpcError) -> tuple[grpc.StatusCode | None, str]:
    """The status code of a failed call (None when the error carries none) and its details (else the error)."""
    code = error.code() if hasattr(error, "code") else None
    return code, (error.details() if hasattr(error, "details") else None) or str(error)


def rpc_failure(error: grpc.RpcError, service: str, address: str, option: str) -> CliError:
    """A CliError for a failed call to `service` at `address`, with a hint for the codes people hit first.

    `option` names how to point the CLI elsewhere (e.g. "--server or LAREDO_SERVER").
    """
    code, details = status_of(error)
    name = code.name if code is not None else "UNKNOWN"
    message = f"{service} at {address} answered {name}: {details}"
    if code is grpc.StatusCode.UNAVAILABLE and _unreachable(details):
        message = (f"cannot reach the {service} at {address} ({details}); is it running? "
                   f"Point the CLI at it with {option}")
        if "socket closed" in details.lower():
            message += " (a port that serves TLS closes cleartext connections: then pass --tls or --ca FILE)"
    elif code is grpc.StatusCode.UNIMPLEMENTED:
        message += " (this server does not offer this operation yet)"
    elif code is grpc.StatusCode.DEADLINE_EXCEEDED:
        message += " (raise --timeout to wait longer; an administrative command may still be carried out)"
    return CliError(message, exit_code_for(code))


def _unreachable(details: str) -> bool:
    lowered = details.lower()
    return any(word in lowered for word in ("failed to connect", "connection refused", "dns resolution",
                                             "name resolution", "errors resolving", "lookup failed",
                                             "connect failed", "socket closed"))

"""Channels to the OAM and Query services, and calls that turn gRPC failures into CliErrors."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf.message import Message
from laredo.v1 import oam_pb2_grpc, query_pb2_grpc

from laredo_cli.errors import CliError, rpc_failure

#: Seconds a request waits for its answer unless --timeout says otherwise. Administrative commands wait for
#: the instances' answers (oam.command_timeout, 10s by default), so this leaves room for that.
DEFAULT_TIMEOUT = 30.0
_SCHEMES = ("http://", "grpc://")


def normalize_address(address: str) -> str:
    """`host:port` as grpc wants it; a pasted `http://host:port/` or `grpc://host:port` is accepted too."""
    text = address.strip()
    for scheme in _SCHEMES:
        if text.startswith(scheme):
            text = text[len(scheme):]
    return text.rstrip("/")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One service the CLI talks to: its name in messages, its address, and how a user changes that address."""

    service: str
    address: str
    option: str


@dataclass
class Service:
    """Calls to one service through one lazily opened channel."""

    endpoint: Endpoint
    stub_type: Callable[[grpc.Channel], Any]
    timeout: float | None = None
    _channel: grpc.Channel | None = field(default=None, init=False)
    _stub: Any = field(default=None, init=False)

    def _stub_method(self, method: str) -> Any:
        if self._stub is None:
            self._channel = grpc.insecure_channel(normalize_address(self.endpoint.address))
            self._stub = self.stub_type(self._channel)
        return getattr(self._stub, method)

    def call(self, method: str, request: Message) -> Any:
        """A unary call with the --timeout deadline (DEFAULT_TIMEOUT when unset)."""
        timeout = self.timeout if self.timeout is not None else DEFAULT_TIMEOUT
        try:
            return self._stub_method(method)(request, timeout=timeout)
        except grpc.RpcError as error:
            raise self.failure(error) from None

    def stream(self, method: str, request: Message, *, duration: float | None) -> Any:
        """A server-streaming call that runs `duration` seconds at most (None: until the server ends it).

        Iterate with `messages()`, which maps errors; the returned call can be cancelled.
        """
        return self._stub_method(method)(request, timeout=duration)

    def messages(self, call: Any, *, duration: float | None) -> Iterator[Any]:
        """The messages of a streaming call; the end of `duration` ends the iteration quietly."""
        try:
            yield from call
        except grpc.RpcError as error:
            if duration is not None and error.code() is grpc.StatusCode.DEADLINE_EXCEEDED:
                return
            if error.code() is grpc.StatusCode.CANCELLED and call.cancelled():
                return
            raise self.failure(error) from None

    def failure(self, error: grpc.RpcError) -> CliError:
        return rpc_failure(error, self.endpoint.service, self.endpoint.address, self.endpoint.option)

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None
            self._stub = None


@dataclass
class Connections:
    """The OAM and Query services; channels open on first use, so a command needs only the one it calls."""

    oam: Service
    query: Service

    @classmethod
    def to(cls, oam: Endpoint, query: Endpoint, timeout: float | None) -> Connections:
        return cls(Service(oam, oam_pb2_grpc.TableSyncOAMStub, timeout),
                   Service(query, query_pb2_grpc.TableSyncQueryStub, timeout))

    def close(self) -> None:
        self.oam.close()
        self.query.close()

"""Channels to the OAM and Query services, and calls that turn gRPC failures into CliErrors."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf.message import Message
from laredo.v1 import oam_pb2_grpc, query_pb2_grpc

from laredo_cli.errors import CliError, rpc_failure
from laredo_cli.security import Link, Security, security_failure
from laredo_client.credentials import call_metadata, parse_address

#: Seconds a request waits for its answer unless --timeout says otherwise. Administrative commands wait for
#: the instances' answers (oam.command_timeout, 10s by default), so this leaves room for that.
DEFAULT_TIMEOUT = 30.0


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One service the CLI talks to: its name in messages, its address, and how a user changes that address."""

    service: str
    address: str
    option: str


@dataclass
class Service:
    """Calls to one service through one lazily opened channel, with TLS and the token when configured."""

    endpoint: Endpoint
    stub_type: Callable[[grpc.Channel], Any]
    timeout: float | None = None
    security: Security = field(default_factory=Security)
    _channel: grpc.Channel | None = field(default=None, init=False)
    _stub: Any = field(default=None, init=False)

    def _stub_method(self, method: str) -> Any:
        if self._stub is None:
            self._channel = self._open_channel()
            self._stub = self.stub_type(self._channel)
        return getattr(self._stub, method)

    def _open_channel(self) -> grpc.Channel:
        target = parse_address(self.endpoint.address).host_port  # a pasted http://, grpc:// or https:// URL too
        tls = self.security.tls_for(self.endpoint.address)
        if tls is None:
            return grpc.insecure_channel(target)
        return grpc.secure_channel(target, tls.channel_credentials(), tls.channel_options())

    def call(self, method: str, request: Message) -> Any:
        """A unary call with the --timeout deadline (DEFAULT_TIMEOUT when unset)."""
        timeout = self.timeout if self.timeout is not None else DEFAULT_TIMEOUT
        try:
            return self._stub_method(method)(request, timeout=timeout, metadata=call_metadata(self.security.token))
        except grpc.RpcError as error:
            raise self.failure(error) from None

    def stream(self, method: str, request: Message, *, duration: float | None) -> Any:
        """A server-streaming call that runs `duration` seconds at most (None: until the server ends it), to
        iterate with `messages()`, which maps errors; the call can be cancelled."""
        return self._stub_method(method)(request, timeout=duration, metadata=call_metadata(self.security.token))

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
        endpoint = self.endpoint
        link = Link(endpoint.service, endpoint.address, self.security.tls_for(endpoint.address),
                    self.security.token)
        return security_failure(error, link) or rpc_failure(error, endpoint.service, endpoint.address,
                                                            endpoint.option)

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
    def to(cls, oam: Endpoint, query: Endpoint, timeout: float | None,
           security: Security | None = None) -> Connections:
        security = security or Security()
        return cls(Service(oam, oam_pb2_grpc.TableSyncOAMStub, timeout, security),
                   Service(query, query_pb2_grpc.TableSyncQueryStub, timeout, security))

    def close(self) -> None:
        self.oam.close()
        self.query.close()

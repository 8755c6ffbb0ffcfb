"""Every NATS connection of the services is opened here, with the URLs, TLS and credentials of `stream`."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Callable, Sequence
from typing import Any

import nats
from nats.aio.client import Client

from laredo_core.runtime import cancel
from laredo_core.stream.nats_servers import NatsServers
from laredo_core.tls import client_ssl_context


#: What a NATS call raises when the server cannot be reached or does not answer in time.
FAILURES = (nats.errors.Error, OSError, asyncio.TimeoutError)


class NatsTlsMissing(nats.errors.Error):
    """TLS was asked for (a tls:// URL or stream.tls) but the server answered in cleartext."""


class NatsTlsFailed(nats.errors.Error):
    """The TLS handshake with the server failed (its certificate was not trusted, or ours refused)."""


async def connect_nats(servers: Sequence[str], *, name: str, **options: Any) -> Client:
    """nats.connect to `servers` (a NatsServers carries TLS and credentials; plain URLs connect as they say).

    `options` are nats.connect's (timeouts, reconnects, callbacks). TLS is used for servers that require it and
    the server's certificate is then always verified (against `stream.tls.ca`, else the system's CAs). nats-py
    upgrades to TLS only when the server asks for it, so when TLS is expected (a `tls://` URL or `stream.tls`)
    and the first server answered in cleartext, the connection is closed and NatsTlsMissing raised.
    """
    without_client_cert = isinstance(servers, NatsServers) and _expects_tls(servers) and not servers.tls.cert
    client = await _connect_or_tls_failure(servers, without_client_cert, name=name, **_security(servers),
                                           **options)
    if _expects_tls(servers) and not _uses_tls(client):
        await client.close()
        url = client.connected_url.geturl() if client.connected_url else ", ".join(servers)
        raise NatsTlsMissing(f"NATS at {url} does not use TLS, but stream.nats_url (tls://) or stream.tls asks for "
                             "it; enable TLS in nats-server (its tls { cert_file, key_file } block)")
    return client


class LazyNatsConnection:
    """A connection made at the first get() (and again once it closed), kept until aclose(); a failure to connect
    raises `unavailable(exc)`. `options` are connect_nats's."""

    def __init__(self, servers: Sequence[str], unavailable: Callable[[Exception], Exception], **options: Any) -> None:
        self.servers = NatsServers.of(servers)
        self._unavailable = unavailable
        self._options = options
        self._nc: Client | None = None
        self._connecting = asyncio.Lock()

    async def get(self) -> Client:
        async with self._connecting:
            if self._nc is None or self._nc.is_closed:
                try:
                    self._nc = await connect_nats(self.servers, **self._options)
                except FAILURES as exc:
                    raise self._unavailable(exc) from exc
            return self._nc

    async def aclose(self) -> None:
        nc, self._nc = self._nc, None
        if nc is not None:
            with contextlib.suppress(*FAILURES):
                await nc.close()


async def _connect_or_tls_failure(servers: Sequence[str], without_client_cert: bool, **options: Any) -> Client:
    """nats.connect, but a failed TLS handshake raises NatsTlsFailed: nats-py would hang in its clean-up after one
    (nats-io/nats.py#718), whatever its reconnect settings."""
    failed: asyncio.Future[ssl.SSLError] = asyncio.get_running_loop().create_future()
    error_cb = options.pop("error_cb", None)
    errors: list[Exception] = []

    async def on_error(exc: Exception) -> None:
        errors.append(exc)
        if isinstance(exc, ssl.SSLError) and not failed.done():
            failed.set_result(exc)
        if error_cb is not None:
            await error_cb(exc)

    connecting = asyncio.ensure_future(nats.connect(servers=list(servers), error_cb=on_error, **options))
    try:
        await asyncio.wait((connecting, failed), return_when=asyncio.FIRST_COMPLETED)
    finally:
        await cancel([connecting])  # nats.connect awaits with wait_for, which can lose a cancellation
    if failed.done() and (connecting.cancelled() or connecting.exception() is not None):
        exc = failed.result()
        raise NatsTlsFailed(f"TLS with NATS at {', '.join(servers)} failed: {exc}; check stream.tls (ca: the CA that "
                            "signs the servers' certificates; cert and key: when the servers require a client "
                            "certificate)") from exc
    if (without_client_cert and not connecting.cancelled() and connecting.exception() is not None and errors
            and all(isinstance(e, (BrokenPipeError, ConnectionResetError)) for e in errors)):
        # TLS 1.3: a server that wants a client certificate may close the connection after the handshake before
        # its alert is read, and the client sees only a broken connection
        raise NatsTlsFailed(f"NATS at {', '.join(servers)} closed the connection right after the TLS handshake "
                            f"({errors[-1]!r}): if it requires a client certificate, set stream.tls cert and key "
                            "to one signed by a CA it trusts") from connecting.exception()
    return connecting.result()


def _security(servers: Sequence[str]) -> dict[str, Any]:
    if not isinstance(servers, NatsServers):
        return {}
    security: dict[str, Any] = {"tls": client_ssl_context(servers.tls)} if servers.tls.configured else {}
    if servers.user:
        security.update(user=servers.user, password=servers.password)
    if servers.token:
        security["token"] = servers.token
    return security


def _expects_tls(servers: Sequence[str]) -> bool:
    if any(url.startswith(("ws://", "wss://")) for url in servers):
        return False  # websocket TLS is the wss:// scheme's business
    configured = isinstance(servers, NatsServers) and servers.tls.configured
    return configured or any(url.startswith("tls://") for url in servers)


def _uses_tls(client: Client) -> bool:
    # nats-py keeps the (possibly TLS-upgraded) stream writer on its transport; no public accessor exists.
    writer = getattr(getattr(client, "_transport", None), "_io_writer", None)
    return writer is not None and writer.get_extra_info("ssl_object") is not None

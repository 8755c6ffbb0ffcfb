"""Where the NATS servers are and how every connection to them is made (URLs, TLS, credentials); no nats import."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NoReturn

from laredo_core.tls import ClientTls


class NatsServers(tuple[str, ...]):
    """The server URLs, as a tuple (`stream.nats_url`), plus what every connection to them uses.

    `tls` (`stream.tls`): the CA that verifies the servers and a client certificate for servers that require one;
    used for `tls://` URLs and for servers that ask for TLS. `user`/`password` or `token`: the credentials the
    servers expect (empty: none, or those in the URL). Immutable; pickles whole (Spark tasks carry it); equal
    only to servers with the same URLs and settings, or to a plain tuple of the same URLs.
    """

    tls: ClientTls
    user: str
    password: str
    token: str

    def __new__(cls, urls: Iterable[str] = (), tls: ClientTls | None = None, user: str = "", password: str = "",
                token: str = "") -> NatsServers:
        servers = super().__new__(cls, urls)
        for name, value in (("tls", tls or ClientTls()), ("user", user), ("password", password), ("token", token)):
            object.__setattr__(servers, name, value)
        return servers

    @classmethod
    def of(cls, urls: Iterable[str]) -> NatsServers:
        """`urls` as they are when already NatsServers (keeping TLS and credentials), else plain URLs."""
        return urls if isinstance(urls, NatsServers) else cls(urls)

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise AttributeError(f"NatsServers is immutable; cannot set {name}")

    def __reduce__(self) -> tuple[Any, ...]:
        return NatsServers, (tuple(self), self.tls, self.user, self.password, self.token)

    def _options(self) -> tuple[Any, ...]:
        return self.tls, self.user, self.password, self.token

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NatsServers):
            return tuple(self) == tuple(other) and self._options() == other._options()
        return tuple.__eq__(self, other)  # type: ignore[arg-type]

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = tuple.__hash__

    def __repr__(self) -> str:
        secrets = ", credentials" if self.password or self.token else ""
        tls = f", tls={self.tls.section or 'on'}" if self.tls.configured else ""
        return f"NatsServers({tuple.__repr__(self)}{tls}{secrets})"

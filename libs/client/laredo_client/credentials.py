"""Connection security of a client: TLS settings, a bearer token, and `https://` addresses. Shared by the client
library and the `laredo` command line, so both read certificates and tokens the same way and never show a token:
reprs and error messages name where a token came from, not what it is."""

from __future__ import annotations

import logging
import os
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from laredo_kernel.errors import ConfigError

log = logging.getLogger(__name__)

AUTHORIZATION = "authorization"
#: Characters a token may hold: what an HTTP header value carries unchanged (visible ASCII, no spaces).
_TOKEN_CHARACTERS = frozenset(string.ascii_letters + string.digits + string.punctuation)
_CLEARTEXT_SCHEMES = ("http://", "grpc://")
_TLS_SCHEME = "https://"
_SERVER_NAME_OPTION = "grpc.ssl_target_name_override"


@dataclass(frozen=True, slots=True)
class TlsOptions:
    """TLS for a client's connections. `ca`: PEM of the CA certificates that sign the server's certificate (None:
    the system's trusted roots); `cert` and `key`: PEM of a client certificate and its private key, for servers
    that require mutual TLS (both or neither); `server_name`: the name the server's certificate must carry, also
    sent as SNI (empty: the host of the address). `TlsOptions()` is TLS with the system's roots."""

    ca: bytes | None = None
    cert: bytes | None = None
    key: bytes | None = field(default=None, repr=False)
    server_name: str = ""

    def __post_init__(self) -> None:
        problems = []
        if (self.cert is None) != (self.key is None):
            problems.append("tls: a client certificate and its key go together: give both cert and key, or neither")
        for name in ("ca", "cert", "key"):
            value = getattr(self, name)
            if value is not None and b"-----BEGIN" not in value:
                problems.append(f"tls.{name}: expected PEM (a '-----BEGIN ...' block), got {len(value)} bytes "
                                f"without one")
        if problems:
            raise ConfigError(problems)

    @classmethod
    def from_files(cls, *, ca: str | Path | None = None, cert: str | Path | None = None,
                   key: str | Path | None = None, server_name: str = "") -> TlsOptions:
        """TLS options from PEM files; ConfigError names every file that cannot be read."""
        problems: list[str] = []
        contents = {name: _read_pem(name, path, problems) for name, path in (("ca", ca), ("cert", cert),
                                                                             ("key", key))}
        if problems:
            raise ConfigError(problems)
        return cls(ca=contents["ca"], cert=contents["cert"], key=contents["key"], server_name=server_name)

    @property
    def mutual(self) -> bool:
        return self.cert is not None

    def channel_credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(root_certificates=self.ca, private_key=self.key,
                                            certificate_chain=self.cert)

    def channel_options(self) -> tuple[tuple[str, str], ...]:
        return ((_SERVER_NAME_OPTION, self.server_name),) if self.server_name else ()


def _read_pem(name: str, path: str | Path | None, problems: list[str]) -> bytes | None:
    if path is None or path == "":
        return None
    try:
        return Path(path).expanduser().read_bytes()
    except OSError as exc:
        problems.append(f"tls.{name}: cannot read {str(path)!r}: {exc.strerror or exc}")
        return None


class BearerToken:
    """A token sent as `authorization: Bearer <token>` with every call; never shown (repr names its source):
    `BearerToken.of(text)`, `.from_env("LAREDO_TOKEN")` (read once) or `.from_file(path)` (read again whenever
    the file changes, so a rotated token is picked up by the next call). Surrounding whitespace (a file's
    trailing newline) is dropped; the token must then be non-empty visible ASCII without spaces."""

    __slots__ = ("_path", "_stamp", "_value", "source")

    def __init__(self, value: str, *, source: str = "given directly", path: Path | None = None) -> None:
        self.source = source
        self._value = _checked(value, source)
        self._path = path
        self._stamp = _stamp(path) if path is not None else None

    @classmethod
    def of(cls, value: str) -> BearerToken:
        return cls(value)

    @classmethod
    def from_env(cls, name: str, env: Mapping[str, str] | None = None) -> BearerToken:
        environment = os.environ if env is None else env
        if name not in environment:
            raise ConfigError([f"token: the environment variable {name} is not set"])
        return cls(environment[name], source=f"from the environment variable {name}")

    @classmethod
    def from_file(cls, path: str | Path) -> BearerToken:
        file = Path(path).expanduser()
        return cls(_read_token(file), source=f"from the file {str(file)!r}", path=file)

    def value(self) -> str:
        """The token; a file read again when it changed since (on failure the last good token is kept)."""
        if self._path is not None:
            stamp = _stamp(self._path)
            if stamp != self._stamp:
                try:
                    self._value = _checked(_read_token(self._path), self.source)
                    self._stamp = stamp
                except ConfigError as exc:
                    log.warning("keeping the previous token: %s", exc)
        return self._value

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return ((AUTHORIZATION, f"Bearer {self.value()}"),)

    def __repr__(self) -> str:
        return f"BearerToken({self.source})"


def _read_token(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError([f"token: cannot read the token file {str(path)!r}: {reason}"]) from None


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size


def _checked(value: str, source: str) -> str:
    """The token without surrounding whitespace; the error never repeats the token itself."""
    token = value.strip()
    if not token:
        raise ConfigError([f"token {source}: is empty"])
    if token[:7].lower() == "bearer ":
        raise ConfigError([f"token {source}: give the token alone, without the 'Bearer ' prefix"])
    if not set(token) <= _TOKEN_CHARACTERS:
        raise ConfigError([f"token {source}: holds spaces, control or non-ASCII characters; a bearer token is "
                           f"visible ASCII without spaces"])
    return token


def call_metadata(token: BearerToken | None) -> tuple[tuple[str, str], ...]:
    """The metadata every call carries: the authorization header when a token is configured."""
    return token.metadata() if token is not None else ()


@dataclass(frozen=True, slots=True)
class Target:
    """Where a channel connects (`host:port`, as grpc wants it) and whether the address asked for TLS."""

    host_port: str
    https: bool


def parse_address(address: str) -> Target:
    """`host:port`, `http://host:port`, `grpc://host:port` (cleartext unless TLS is configured) or
    `https://host:port` (TLS); a trailing slash is ignored."""
    text = address.strip()
    scheme = next((s for s in (_TLS_SCHEME, *_CLEARTEXT_SCHEMES) if text.lower().startswith(s)), "")
    return Target(text[len(scheme):].rstrip("/"), scheme == _TLS_SCHEME)


def says_cleartext(address: str) -> bool:
    """The address names a cleartext scheme (`http://`, `grpc://`): TLS settings contradict it."""
    return address.strip().lower().startswith(_CLEARTEXT_SCHEMES)

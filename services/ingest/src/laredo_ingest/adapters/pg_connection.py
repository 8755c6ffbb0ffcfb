"""psycopg connection parameters shared by the SQL and replication adapters, and error wrapping."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from laredo_kernel.pgtext import SESSION_SETTINGS

from laredo_ingest.domain.errors import IngestError, SourceUnavailable


def session_conninfo(dsn: str) -> str:
    """The DSN with laredo_kernel.pgtext.SESSION_SETTINGS appended to `options`, so every connection
    (the walsender too) renders values in the text forms the stream promises."""
    params = conninfo_to_dict(dsn)
    settings = " ".join(f"-c {name}={_escape_option(value)}" for name, value in SESSION_SETTINGS.items())
    existing = params.get("options")
    params["options"] = f"{existing} {settings}" if existing else settings
    return make_conninfo("", **params)


def describe_dsn(dsn: str) -> str:
    """host:port/dbname as user, never the password: for error messages and logs."""
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "<unparsable connection string>"
    host = params.get("host") or params.get("hostaddr") or "localhost"
    return f"{host}:{params.get('port') or 5432}/{params.get('dbname') or params.get('user') or '?'}" + (
        f" as {params['user']}" if params.get("user") else "")


def _escape_option(value: str) -> str:
    return value.replace("\\", "\\\\").replace(" ", "\\ ")


async def connect(dsn: str, **kwargs: Any) -> psycopg.AsyncConnection:
    """An autocommit connection with the session settings; a failure is SourceUnavailable naming the server."""
    try:
        return await psycopg.AsyncConnection.connect(session_conninfo(dsn), autocommit=True, **kwargs)
    except psycopg.OperationalError as exc:
        raise SourceUnavailable(
            f"cannot connect to PostgreSQL at {describe_dsn(dsn)}: {_first_line(exc)}; check the source's connection "
            "setting and that the server is running and accepts connections from this host") from exc


@contextlib.asynccontextmanager
async def wrap_errors(what: str, dsn: str) -> AsyncIterator[None]:
    """Lost connections become SourceUnavailable (retried); other server errors an IngestError naming `what`."""
    try:
        yield
    except psycopg.OperationalError as exc:
        raise SourceUnavailable(f"{what} on {describe_dsn(dsn)} failed, connection lost: {_first_line(exc)}") from exc
    except psycopg.Error as exc:
        raise IngestError(f"{what} on {describe_dsn(dsn)} failed: {_first_line(exc)}") from exc


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

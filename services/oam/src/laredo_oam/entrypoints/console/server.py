"""OAM's web console: its page and files, served to the front door on a private Unix socket, so the page and
the Connect calls it makes share the OAM address (one origin, no CORS to configure).

GET /console/ is the page, /console/<file> its assets (built by scripts/build-console into assets/), and
/console/identity says which role the caller's credential has, so the page offers admin actions only to the
admin role. The server enforces roles on every call anyway; what the page shows is a convenience.
"""

from __future__ import annotations

import contextlib
import logging
import os
from importlib import resources

from aiohttp import web

from laredo_core.auth.authenticator import Authenticator
from laredo_core.auth.identity import Identity
from laredo_core.auth.settings import AuthSettings

log = logging.getLogger(__name__)

ASSETS = resources.files(__package__) / "assets"
_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}


class ConsoleServer:
    """`socket` is where the front door sends GET /console/... (EnvoyFrontDoor.console_socket)."""

    def __init__(self, socket: str, auth: AuthSettings | None, *, trust_client_cert_header: bool) -> None:
        self._socket = socket
        self._authenticator = Authenticator(auth, trust_client_cert_header=trust_client_cert_header) \
            if auth is not None else None
        self._runner: web.AppRunner | None = None

    async def start(self) -> ConsoleServer:
        app = web.Application()
        app.router.add_get("/console", self._to_page)
        app.router.add_get("/console/", self._asset)
        app.router.add_get("/console/identity", self._identity)
        app.router.add_get("/console/{name}", self._asset)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.UnixSite(self._runner, self._socket).start()
        log.info("web console at /console/ on the OAM address")
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._socket)

    async def _to_page(self, _: web.Request) -> web.Response:
        raise web.HTTPMovedPermanently("/console/")

    async def _asset(self, request: web.Request) -> web.Response:
        return _file(request.match_info.get("name", "index.html"))

    async def _identity(self, request: web.Request) -> web.Response:
        """{"role": "admin" | "read" | null, "name", "authenticated"}; 401 with the reason for a credential that
        does not verify. Without `auth` configured every caller may do everything."""
        if self._authenticator is None:
            return web.json_response({"role": "admin", "name": "anyone (no authentication configured)",
                                      "authenticated": False})
        found = self._authenticator.authenticate({k.lower(): v for k, v in request.headers.items()}, "console")
        if not isinstance(found, Identity):
            return web.json_response({"error": found.message}, status=401)
        return web.json_response({"role": found.role.label if found.role is not None else None, "name": found.name,
                                  "authenticated": True})


def _file(name: str) -> web.Response:
    suffix = os.path.splitext(name)[1]
    asset = ASSETS / name
    if "/" in name or name.startswith(".") or suffix not in _TYPES or not asset.is_file():
        raise web.HTTPNotFound(text=f"no console file {name!r}")
    return web.Response(body=asset.read_bytes(), content_type=_TYPES[suffix],
                        headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"})

"""Listening beyond this machine without authentication deserves a loud warning at start."""

from __future__ import annotations

import ipaddress
import logging

log = logging.getLogger(__name__)


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address) reaches only this machine."""
    host = host.strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # "", 0.0.0.0 handled above as addresses; any other name may resolve anywhere


def warn_if_exposed(host: str, port: int, service: str, *, authenticated: bool) -> bool:
    """Log a WARNING when a port without authentication listens on a non-loopback address; True if it did."""
    if authenticated or is_loopback(host):
        return False
    log.warning("SECURITY: the %s port listens on %s:%d WITHOUT AUTHENTICATION: anyone who reaches it may call "
                "every RPC, including ResetSource, PauseSync and reading every row. Configure an `auth` section "
                "(tokens, jwt or mtls; see docs/security.md), or listen on 127.0.0.1",
                service, host or "0.0.0.0", port)
    return True

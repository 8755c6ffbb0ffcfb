"""Instance ids: unique per process, readable in logs and usable inside coordination keys."""

from __future__ import annotations

import os
import re
import secrets
import socket

_UNSAFE = re.compile(r"[^a-z0-9._-]+")
MAX_HOST_CHARS = 40


def default_instance_id(service: str) -> str:
    """`<hostname>-<pid>-<6 hex digits>`, e.g. `web-7f9c-4121-a03f9e` (the service name when the host has no usable
    name); the random suffix keeps ids unique when PIDs repeat (every container's main process is PID 1)."""
    host = _UNSAFE.sub("-", socket.gethostname().lower()).strip("-.")[:MAX_HOST_CHARS].strip("-.")
    return f"{host or _UNSAFE.sub('-', service.lower()) or 'laredo'}-{os.getpid()}-{secrets.token_hex(3)}"

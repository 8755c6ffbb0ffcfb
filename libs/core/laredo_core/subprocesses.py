"""Child processes that end with the service that started them, however it ends (Envoy, workers)."""

from __future__ import annotations

import ctypes
import shutil
import signal
from collections.abc import Callable, Sequence
from typing import Any

_PR_SET_PDEATHSIG = 1

# Looked up here, in the parent: between fork and exec the child only makes the call.
_PRCTL: Callable[..., int] | None
try:
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux: the service's own stop still ends its children
    _PRCTL = None


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the parent process dies."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGTERM)


def tied_to_parent(args: Sequence[str]) -> tuple[list[str], dict[str, Any]]:
    """The command and the keyword arguments of asyncio.create_subprocess_exec that start `args` as a child
    which gets SIGTERM when this process dies: util-linux's setpriv sets that and execs the program (nothing
    of Python runs in the child); without setpriv, a preexec call does the same."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return list(args), {"preexec_fn": _die_with_parent}
    return [setpriv, "--pdeathsig", "TERM", "--", *args], {}

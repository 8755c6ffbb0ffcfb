"""Error types shared by every service: a base class with a retryable flag."""

from __future__ import annotations


class LaredoError(Exception):
    """Base of every error Laredo raises on purpose. Messages say what failed and what to do."""

    retryable: bool = False

    def __init__(self, message: str, *, retryable: bool | None = None) -> None:
        super().__init__(message)
        if retryable is not None:
            self.retryable = retryable


class ProtocolError(LaredoError):
    """Bytes that do not follow the wire format they claim (pgoutput, tuple data, change batch)."""


class ConfigError(LaredoError):
    """The configuration is invalid; the message lists every problem, each with its key."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid configuration ({len(self.problems)} problem(s)):\n{lines}")

"""Load one HOCON file plus overrides, and read it with typed accessors that collect every problem."""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from laredo_kernel.errors import ConfigError

_MISSING: Any = object()
_DURATION = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
_DURATION_UNITS = {
    "": 1.0, "s": 1.0, "sec": 1.0, "second": 1.0, "seconds": 1.0,
    "ms": 1e-3, "milli": 1e-3, "millis": 1e-3, "millisecond": 1e-3, "milliseconds": 1e-3,
    "us": 1e-6, "micros": 1e-6, "microsecond": 1e-6, "microseconds": 1e-6,
    "ns": 1e-9, "nanos": 1e-9, "nanosecond": 1e-9, "nanoseconds": 1e-9,
    "m": 60.0, "min": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
}  # fmt: skip
_SIZE = re.compile(r"^\s*(\d+)\s*([a-zA-Z]*)\s*$")
_SIZE_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 10**6, "mb": 10**6,
               "mib": 2**20, "g": 10**9, "gb": 10**9, "gib": 2**30}  # fmt: skip
ENV_PREFIX = "LAREDO__"


def load_tree(path: str | Path | None, *, env: Mapping[str, str] | None = None,
              sets: list[str] | None = None) -> dict[str, Any]:
    """Parse the HOCON file, then apply environment overrides, then `--set key=value` overrides.

    Environment: LAREDO__A__B__C=value sets a.b.c (case-insensitive match on
    existing keys; list elements by index). `--set a.b.c=value` does the same.
    """
    from pyhocon import ConfigFactory  # parsing is the only place that needs it
    from pyhocon.exceptions import ConfigException
    from pyparsing import ParseBaseException

    env = os.environ if env is None else env
    if path is None:
        tree: dict[str, Any] = {}
    else:
        p = Path(path)
        if not p.is_file():
            raise ConfigError([f"config file {str(p)!r} does not exist (pass --config PATH or set LAREDO_CONFIG)"])
        try:
            tree = _plain(ConfigFactory.parse_file(str(p), resolve=True).as_plain_ordered_dict())
        except (ConfigException, ParseBaseException) as exc:
            raise ConfigError([f"{p}: HOCON syntax error: {exc}"]) from exc
    problems: list[str] = []
    for name, value in sorted(env.items()):
        if name.startswith(ENV_PREFIX) and len(name) > len(ENV_PREFIX):
            keys = [k.lower() for k in name[len(ENV_PREFIX):].split("__")]
            _set_path(tree, keys, value, f"environment variable {name}", problems)
    for item in sets or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            problems.append(f"--set {item!r}: expected key.path=value")
            continue
        _set_path(tree, key.strip().split("."), value, f"--set {key}", problems)
    if problems:
        raise ConfigError(problems)
    return tree


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _set_path(tree: Any, keys: list[str], value: str, origin: str, problems: list[str]) -> None:
    node = tree
    for i, key in enumerate(keys):
        if isinstance(node, list):
            if not key.isdigit() or int(key) >= len(node):
                problems.append(f"{origin}: {'.'.join(keys[:i + 1])} is not an element of a {len(node)}-element list")
                return
            slot: Any = int(key)
        elif isinstance(node, dict):
            slot = next((k for k in node if k.lower() == key.lower()), key)
        else:
            problems.append(f"{origin}: {'.'.join(keys[:i])} is a value, not a section")
            return
        if i == len(keys) - 1:
            node[slot] = value
        else:
            node = node.setdefault(slot, {}) if isinstance(node, dict) else node[slot]


class Reader:
    """Typed, problem-collecting access to one section of the configuration tree."""

    def __init__(self, tree: Mapping[str, Any], path: str = "", problems: list[str] | None = None) -> None:
        self.tree = tree
        self.path = path
        self.problems: list[str] = [] if problems is None else problems
        self._read: set[str] = set()

    def key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def problem(self, name: str, message: str) -> None:
        self.problems.append(f"{self.key(name)}: {message}")

    def has(self, name: str) -> bool:
        return name in self.tree

    def raw(self, name: str, default: Any = _MISSING) -> Any:
        self._read.add(name)
        if name in self.tree and self.tree[name] is not None:
            return self.tree[name]
        if default is _MISSING:
            self.problem(name, "is required")
        return default

    def section(self, name: str) -> Reader:
        value = self.raw(name, {})
        if not isinstance(value, Mapping):
            self.problem(name, f"expected a section {{ ... }}, got {value!r}")
            value = {}
        return Reader(value, self.key(name), self.problems)

    def sections(self, name: str) -> list[Reader]:
        value = self.raw(name, [])
        if not isinstance(value, list):
            self.problem(name, f"expected a list [ {{ ... }}, ... ], got {value!r}")
            return []
        readers = []
        for i, item in enumerate(value):
            if not isinstance(item, Mapping):
                self.problem(f"{name}[{i}]", f"expected a section {{ ... }}, got {item!r}")
                continue
            readers.append(Reader(item, f"{self.key(name)}[{i}]", self.problems))
        return readers

    def string(self, name: str, default: Any = _MISSING, *, choices: tuple[str, ...] = ()) -> str:
        value = self.raw(name, default)
        if value is _MISSING or value is None:
            return "" if default is _MISSING else default
        if isinstance(value, (dict, list)):
            self.problem(name, f"expected a string, got {value!r}")
            return "" if default is _MISSING else default
        text = str(value)
        if choices and text not in choices:
            self.problem(name, f"expected one of {', '.join(choices)}, got {text!r}")
            return default if default is not _MISSING else choices[0]
        return text

    def integer(self, name: str, default: Any = _MISSING, *, minimum: int | None = None,
                maximum: int | None = None) -> int:
        value = self.raw(name, default)
        if value is _MISSING:
            return 0
        try:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            number = int(value)
        except (TypeError, ValueError):
            self.problem(name, f"expected a whole number, got {value!r}")
            return default if isinstance(default, int) else 0
        if minimum is not None and number < minimum:
            self.problem(name, f"must be at least {minimum}, got {number}")
        if maximum is not None and number > maximum:
            self.problem(name, f"must be at most {maximum}, got {number}")
        return number

    def number(self, name: str, default: Any = _MISSING, *, minimum: float | None = None,
               maximum: float | None = None) -> float:
        value = self.raw(name, default)
        if value is _MISSING:
            return 0.0
        try:
            if isinstance(value, bool):
                raise ValueError
            number = float(value)
        except (TypeError, ValueError):
            self.problem(name, f"expected a number, got {value!r}")
            return float(default) if isinstance(default, (int, float)) else 0.0
        if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
            self.problem(name, f"must be between {minimum} and {maximum}, got {number}")
        return number

    def boolean(self, name: str, default: Any = _MISSING) -> bool:
        value = self.raw(name, default)
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "yes", "on", "1"):
            return True
        if text in ("false", "no", "off", "0"):
            return False
        self.problem(name, f"expected true or false, got {value!r}")
        return bool(default) if isinstance(default, bool) else False

    def duration(self, name: str, default: Any = _MISSING) -> float:
        """Seconds; accepts '500ms', '5s', '10m', '24h', '7d', '10 seconds' or a number of seconds."""
        value = self.raw(name, default)
        if value is _MISSING:
            return 0.0
        seconds = parse_duration(value)
        if seconds is None:
            self.problem(name, f"expected a duration such as 500ms, 5s, 10m, 24h or 7d, got {value!r}")
            return float(default) if isinstance(default, (int, float)) else 0.0
        if seconds < 0:
            self.problem(name, f"must not be negative, got {value!r}")
        return seconds

    def size(self, name: str, default: Any = _MISSING) -> int:
        """Bytes; accepts 512KiB, 1MB, 2GiB or a number of bytes."""
        value = self.raw(name, default)
        if value is _MISSING:
            return 0
        match = _SIZE.match(str(value))
        unit = match.group(2).lower() if match else None
        if not match or unit not in _SIZE_UNITS:
            self.problem(name, f"expected a size such as 512KiB, 1MB or 1048576, got {value!r}")
            return default if isinstance(default, int) else 0
        return int(match.group(1)) * _SIZE_UNITS[unit]

    def string_list(self, name: str, default: Any = _MISSING) -> list[str]:
        value = self.raw(name, default)
        if value is _MISSING:
            return []
        if isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, list) or any(isinstance(v, (dict, list)) for v in value):
            self.problem(name, f"expected a list of strings, got {value!r}")
            return list(default) if isinstance(default, list) else []
        return [str(v) for v in value]

    def check_unknown(self, also_known: tuple[str, ...] = ()) -> None:
        """Report keys nobody read: usually a typo."""
        for name in self.tree:
            if name not in self._read and name not in also_known:
                self.problem(name, "unknown key (check the spelling; see docs/configuration.md)")

    def raise_if_problems(self) -> None:
        if self.problems:
            raise ConfigError(self.problems)


def json_values(value: Any) -> Any:
    """Configuration values as JSON values, for showing them: durations as seconds, sections as objects.

    pyhocon parses an unquoted `5s` into a relativedelta, whose str() is a Python repr, not a value to show.
    """
    if isinstance(value, Mapping):
        return {str(k): json_values(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_values(v) for v in value]
    if isinstance(value, dt.timedelta) or type(value).__name__ == "relativedelta":
        return parse_duration(value)
    return value


def parse_duration(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if type(value).__name__ == "relativedelta":  # pyhocon parses '24h' into dateutil's relativedelta
        days = value.days + 30 * value.months + 365 * value.years
        return (days * 86400 + value.hours * 3600 + value.minutes * 60 + value.seconds
                + value.microseconds / 1e6)
    match = _DURATION.match(str(value))
    if not match or match.group(2).lower() not in _DURATION_UNITS:
        return None
    return float(match.group(1)) * _DURATION_UNITS[match.group(2).lower()]

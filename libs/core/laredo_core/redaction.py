"""The one rule that keeps secrets inside: what counts as a secret, and how it is shown (`***`).

Applied to everything that leaves a process (RPC answers that carry configuration, the status in the coordination
store, health bodies, log lines, error messages, `--check-config`) in three pure layers: by key name
(`redact_tree`), inside connection strings (`redact_url`), and by value (`Redactor.text`: every secret value the
configuration holds, wherever it appears). User names, hosts, ports and databases stay visible; S3 access keys
are redacted as fully as secret keys. The process's Redactor (`activate`) is set once the configuration is loaded
(laredo_core.cli), so the log filter and the status heartbeat know the configured values.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote

REDACTED = "***"
#: Known secret values shorter than this are not searched for in free text (they would mangle every log line);
#: inside URLs, DSNs and key=value pairs they are still redacted by position.
MIN_SECRET_LENGTH = 4
#: Key names (lower case, without separators) that contain one of these hold secrets.
SECRET_KEY_WORDS = ("password", "passwd", "pwd", "secret", "token", "credential", "privatekey", "accesskey",
                    "apikey", "authorization", "passphrase", "cookie")
#: Inside a secret-named section, keys that describe a secret rather than hold it (never collected as values).
DESCRIPTIVE_KEYS = frozenset({"role", "roles", "name", "id", "type", "kind", "table", "tables", "description",
                              "comment", "enabled", "scope", "scopes", "subject", "identity", "issuer", "audience"})
#: URL schemes whose user part alone is a credential (NATS takes `nats://<token>@host`).
TOKEN_USER_SCHEMES = frozenset({"nats", "tls", "ws", "wss"})
_FILE_LIMIT = 64 * 1024
_FIELD_MIN = 16  # a whitespace/colon-separated field of a secret file at least this long counts on its own

_SECRET_WORD = r"(?:passw(?:or)?d|pwd|secret|token|credential|private[_-]?key|access[_-]?key|api[_-]?key|" \
               r"authorization|passphrase|cookie)"
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*)://(?P<userinfo>[^\s/?#'\"<>]*)@")
_KEY_VALUE = re.compile(
    r"(?P<key>[\"']?\b[\w.-]*" + _SECRET_WORD + r"[\w.-]*[\"']?)(?P<sep>\s*=\s*|\s*:\s*(?=[\"']))"
    r"(?P<value>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^\s&'\",;)}\]]+)", re.IGNORECASE)
_HEADER = re.compile(r"\b(?P<head>(?:proxy-)?authorization\s*:\s*(?:(?:bearer|basic|token)\s+)?)"
                     r"(?P<value>[^\s,;'\"]+)", re.IGNORECASE)
_BEARER = re.compile(r"\b(?P<head>bearer\s+)(?P<value>[A-Za-z0-9._~+/=-]{8,})", re.IGNORECASE)


def is_secret_key(name: object) -> bool:
    """True for a key whose value is a secret: secret_key, accessKey, DB_PASSWORD, x-auth-token, ..."""
    normalized = re.sub(r"[^a-z0-9]", "", str(name).lower())
    return any(word in normalized for word in SECRET_KEY_WORDS)


def redact_url(text: str) -> str:
    """`text` with the credentials of every URL/DSN in it replaced by `***` (user, host and path kept)."""
    text = _URL_USERINFO.sub(_redact_userinfo, text)
    text = _HEADER.sub(lambda m: m["head"] + REDACTED, text)
    text = _BEARER.sub(lambda m: m["head"] + REDACTED, text)
    return _KEY_VALUE.sub(_redact_key_value, text)


def redact_tree(value: Any, scrub: Any = redact_url) -> Any:
    """A copy of a configuration or status tree (mappings, lists, scalars) safe to show.

    The value of a secret-named key becomes `***` (containers keep their shape, each leaf redacted; empty
    strings, booleans and None stay, so "not set" remains visible); every other string goes through `scrub`.
    """
    if isinstance(value, Mapping):
        return {key: redact_tree(item, _hidden if is_secret_key(key) else scrub) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_tree(item, scrub) for item in value]
    return scrub(value) if isinstance(value, str) or scrub is _hidden else value


def secret_values(tree: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """Every secret value a configuration tree holds, for scrubbing free text.

    Values of secret-named keys (and of every key below one, except descriptive ones such as `role`), the
    passwords and tokens inside connection strings, and the contents of files (`file`, `*_file`, `*_path`)
    and environment variables (`env`, `*_env`) named inside secret-named sections, such as
    `auth { tokens = [ { file = "/run/secrets/admin", roles = [admin] } ] }`. Unreadable files are skipped.
    """
    found: set[str] = set()
    _collect(tree, False, os.environ if environ is None else environ, found)
    return frozenset(v for v in found if len(v) >= MIN_SECRET_LENGTH)


def url_secrets(text: str) -> set[str]:
    """The passwords and tokens written inside the connection strings of `text` (as written and decoded)."""
    found: set[str] = set()
    for match in _URL_USERINFO.finditer(text):
        user, colon, password = match["userinfo"].partition(":")
        secret = password if colon else user if match["scheme"].lower() in TOKEN_USER_SCHEMES else ""
        found.update((secret, unquote(secret)))
    for match in _KEY_VALUE.finditer(text):
        value = match["value"]
        found.update((value, value[1:-1] if value[:1] in "'\"" else value, unquote(value)))
    return found - {"", REDACTED}


class Redactor:
    """Scrubs free text and trees with the rule above plus a fixed set of known secret values."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = tuple(sorted({s for s in secrets if len(s) >= MIN_SECRET_LENGTH}, key=len, reverse=True))
        self._known = re.compile("|".join(map(re.escape, self.secrets))) if self.secrets else None

    @classmethod
    def from_tree(cls, tree: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> Redactor:
        """A Redactor knowing every secret of a loaded configuration tree (LaredoSettings.raw)."""
        return cls(secret_values(tree, environ))

    def text(self, text: str) -> str:
        """`text` with every known secret value and every connection-string credential replaced by `***`."""
        if self._known is not None:
            text = self._known.sub(REDACTED, text)
        return redact_url(text)

    def tree(self, value: Any) -> Any:
        """redact_tree with this Redactor's text scrubbing on every string."""
        return redact_tree(value, self.text)


_active = Redactor()


def activate(redactor: Redactor) -> None:
    """Make `redactor` the process's (laredo_core.cli does once the configuration is loaded)."""
    global _active
    _active = redactor


def active() -> Redactor:
    """The process's Redactor: the rule alone until a configuration is activated."""
    return _active


def scrub(text: str) -> str:
    """`text` safe to show, by the process's Redactor."""
    return _active.text(text)


def scrub_tree(value: Any) -> Any:
    """A tree safe to show, by the process's Redactor."""
    return _active.tree(value)


class RedactingLogFilter(logging.Filter):
    """Scrubs each record's message, exception and stack text with the process's Redactor before it is written.

    Installed on handlers (a filter on a logger does not see records propagated from other loggers).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        redactor = active()
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record: logging reports it when formatting
            return True
        record.msg, record.args = redactor.text(message), ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redactor.text(record.exc_text)
        if record.stack_info:
            record.stack_info = redactor.text(record.stack_info)
        return True


def install_log_filter(handlers: Iterable[logging.Handler] | None = None) -> RedactingLogFilter:
    """Add one RedactingLogFilter to `handlers` (default: the root logger's), skipping those that have one."""
    log_filter = RedactingLogFilter()
    for handler in logging.getLogger().handlers if handlers is None else handlers:
        if not any(isinstance(f, RedactingLogFilter) for f in handler.filters):
            handler.addFilter(log_filter)
    return log_filter


def _redact_userinfo(match: re.Match[str]) -> str:
    scheme, userinfo = match["scheme"], match["userinfo"]
    user, colon, password = userinfo.partition(":")
    if colon and password:
        userinfo = f"{user}:{REDACTED}"
    elif not colon and user and scheme.lower() in TOKEN_USER_SCHEMES:
        userinfo = REDACTED
    return f"{scheme}://{userinfo}@"


def _redact_key_value(match: re.Match[str]) -> str:
    value = match["value"]
    quote = value[0] if value[:1] in "'\"" and len(value) > 1 else ""
    return f"{match['key']}{match['sep']}{quote}{REDACTED}{quote}"


def _hidden(leaf: Any) -> Any:
    """A leaf below a secret-named key: every non-empty string or number becomes ***."""
    return leaf if isinstance(leaf, bool) or leaf is None or leaf == "" else REDACTED


def _collect(value: Any, secret: bool, environ: Mapping[str, str], found: set[str]) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            _collect_entry(str(key), item, secret or is_secret_key(key), environ, found)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _collect(item, secret, environ, found)
    elif isinstance(value, str):
        found.update(url_secrets(value))
        if secret:
            found.add(value.strip())
    elif secret and isinstance(value, (int, float)) and not isinstance(value, bool):
        found.add(str(value))


def _collect_entry(key: str, value: Any, secret: bool, environ: Mapping[str, str], found: set[str]) -> None:
    name = re.sub(r"[^a-z0-9]", "", key.lower())
    if secret and name.endswith(("file", "files", "path", "paths")):
        for path in _strings(value):
            found.update(_file_secrets(path))
    elif secret and name.endswith(("env", "envs")):
        found.update(environ.get(variable, "").strip() for variable in _strings(value))
    elif not (secret and key.lower() in DESCRIPTIVE_KEYS):
        _collect(value, secret, environ, found)


def _strings(value: Any) -> list[str]:
    """A string, or the strings of a list: what a key naming files or variables holds."""
    items = value if isinstance(value, (list, tuple)) else [value]
    return [item for item in items if isinstance(item, str)]


def _file_secrets(path: str) -> set[str]:
    """The secret values a file holds: its whole text, each line, and each long field of a line."""
    try:
        with Path(path).expanduser().open("r", encoding="utf-8") as file:
            text = file.read(_FILE_LIMIT)
    except (OSError, UnicodeDecodeError, ValueError):
        return set()
    found = {text.strip()}
    for line in text.splitlines():
        found.add(line.strip())
        found.update(f for f in re.split(r"[\s:,=]+", line) if len(f) >= _FIELD_MIN)
    return found

"""ListRows page tokens: keyset cursors that stay valid while rows change.

A token holds the table, its primary key columns and the last primary key of the page it ends, as "v1." +
base64url(JSON). The next page holds the rows whose keys come after that key in key order, so: every row that exists
for the whole listing is returned exactly once, whatever changes in between (including the deletion of the row the
token names); rows inserted behind the cursor are not returned, rows inserted ahead of it are. Tokens never expire; a
token from another table, or from before the table's primary key changed, is rejected with a message saying so.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from laredo_query.domain.errors import InvalidPageToken, InvalidRequest
from laredo_query.domain.keys import Key, KeySpec

_PREFIX = "v1."
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000


@dataclass(frozen=True, slots=True)
class PageCursor:
    """Where a page starts: after `key`, or at the first row when `start` is set."""

    key: Key = None
    start: bool = True


def page_size(requested: int) -> int:
    """0 means the default; larger than the maximum is capped (not an error); negative is."""
    if requested < 0:
        raise InvalidRequest(f"page_size must not be negative, got {requested}; 0 means the default "
                               f"({DEFAULT_PAGE_SIZE})")
    return DEFAULT_PAGE_SIZE if requested == 0 else min(requested, MAX_PAGE_SIZE)


def encode_token(table: str, spec: KeySpec, last_key: Key) -> str:
    body = json.dumps([table, list(spec.fields), spec.to_json(last_key)], separators=(",", ":"),
                      ensure_ascii=False)
    return _PREFIX + base64.urlsafe_b64encode(body.encode()).decode("ascii").rstrip("=")


def decode_token(token: str, table: str, spec: KeySpec) -> PageCursor:
    """The cursor a token names; InvalidPageToken says what is wrong with it."""
    if not token:
        return PageCursor()
    body = _body(token)
    if not (isinstance(body, list) and len(body) == 3 and isinstance(body[0], str)
            and isinstance(body[1], list)):
        raise InvalidPageToken("page_token is malformed (unexpected content); pass the next_page_token of "
                               "a previous ListRows response unchanged, or none for the first page")
    token_table, fields, key_json = body
    if token_table != table:
        raise InvalidPageToken(f"page_token belongs to a listing of {token_table}, not {table}; "
                               "start this listing without a page token")
    if tuple(fields) != spec.fields:
        raise InvalidPageToken(f"page_token was issued for primary key ({', '.join(map(str, fields))}) of "
                               f"{table}, whose key is now ({', '.join(spec.fields)}); start again "
                               "without a page token")
    try:
        return PageCursor(spec.from_json(key_json), start=False)
    except (ValueError, TypeError, ArithmeticError) as exc:
        raise InvalidPageToken(f"page_token is malformed (its key does not fit the columns of {table}: "
                               f"{exc}); start again without a page token") from None


def _body(token: str) -> Any:
    if not token.startswith(_PREFIX):
        raise InvalidPageToken(f"page_token {_preview(token)} is not one this service issued (expected "
                               f"the '{_PREFIX}' prefix); pass next_page_token from a previous response "
                               "unchanged, or none for the first page")
    encoded = token[len(_PREFIX):]
    try:
        raw = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
        return json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError, UnicodeDecodeError) as exc:
        raise InvalidPageToken(f"page_token {_preview(token)} is malformed (not base64url JSON: {exc}); pass "
                               "next_page_token from a previous response unchanged") from None


def _preview(token: str) -> str:
    return repr(token if len(token) <= 40 else token[:40] + "...")

"""Reads over the Query service: lookup, get, list, count, subscribe."""

from __future__ import annotations

import argparse
import json
from typing import Any

from google.protobuf import struct_pb2
from laredo.v1 import query_pb2

from laredo_cli.commands.common import (Context, Registrar, TableName, positive_int, print_answer, print_json,
                                        stream_messages, table_name, when)
from laredo_cli.errors import CliError, ExitCode, Refused
from laredo_cli.output import format_value, render_fields, render_rows
from laredo_cli.protojson import message_to_json, python_to_value, struct_to_dict

TYPED_HELP = ("parse each value as JSON (5, true, null, \"text\", {\"a\": 1}); without it every value is sent "
              "as text and the service converts it to the column's type")


def _row_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--columns", type=column_list, metavar="A,B,...",
                        help="show these columns in this order (default: every column, sorted by name)")
    parser.add_argument("--wide", action="store_true", help="do not cut long values in tables")


def register(commands: Registrar) -> None:
    _add_lookup(commands)
    get = commands.add(
        "get", help="one row by primary key",
        description="The row with this primary key (one value per key column, in key order). Exit code 1 "
                    "when there is none. Query RPC GetRow.",
        examples=["laredo get public.users 42", "laredo get public.accounts eu c7 --json"], handler=run_get)
    get.add_argument("table", type=table_name, metavar="SCHEMA.TABLE")
    get.add_argument("key", nargs="+", metavar="KEY", help="primary key value(s)")
    get.add_argument("--typed", action="store_true", help=TYPED_HELP)
    _row_options(get)
    _add_list(commands)

    count = commands.add(
        "count", help="the number of rows of a table",
        description="The number of rows the Query service holds for the table (just the number, or "
                    '{"count": N} with --json). Query RPC CountRows.',
        examples=["laredo count public.users"], handler=run_count)
    count.add_argument("table", type=table_name, metavar="SCHEMA.TABLE")
    _add_subscribe(commands)


def _add_lookup(commands: Registrar) -> None:
    lookup = commands.add(
        "lookup", help="find rows by an index key",
        description="Find the row whose key in an index equals the values given (one value per index "
                    "column). Without --index the table's lookup index (lookup_fields) is used. --all returns "
                    "every match of a non-unique index. Exit code 1 when no row matches. Query RPCs Lookup, "
                    "LookupAll.",
        examples=["laredo lookup public.users alice@example.com",
                  "laredo lookup public.orders --index by_status --all paid",
                  "laredo lookup public.items --index by_status_qty --all --typed '\"even\"' 4"], handler=run_lookup)
    lookup.add_argument("table", type=table_name, metavar="SCHEMA.TABLE")
    lookup.add_argument("values", nargs="+", metavar="VALUE", help="the key, one value per index column")
    lookup.add_argument("--index", default="", metavar="NAME", help="the index to use (required with --all)")
    lookup.add_argument("--all", action="store_true", help="every matching row (LookupAll)")
    lookup.add_argument("--typed", action="store_true", help=TYPED_HELP)
    _row_options(lookup)


def _add_list(commands: Registrar) -> None:
    listing = commands.add(
        "list", help="rows page by page, in primary key order",
        description="A page of rows in primary key order, with the total count and the token of the next "
                    "page. --all follows the pages to the end. Query RPC ListRows.",
        examples=["laredo list public.users --page-size 20", "laredo list public.users --page-token TOKEN",
                  "laredo list public.users --all --json"], handler=run_list)
    listing.add_argument("table", type=table_name, metavar="SCHEMA.TABLE")
    listing.add_argument("--page-size", type=positive_int, default=0, metavar="N",
                         help="rows per page (default: the service's, 100)")
    listing.add_argument("--page-token", default="", metavar="TOKEN",
                         help="the next_page_token of the previous page")
    listing.add_argument("--all", action="store_true", help="follow next_page_token to the last page")
    _row_options(listing)


def _add_subscribe(commands: Registrar) -> None:
    subscribe = commands.add(
        "subscribe", help="stream a table's changes",
        description="Print a table's changes one per line (a JSON object per line with --json) as the Query "
                    "service applies them; --replay first sends every current row as an INSERT. Runs until "
                    "Ctrl-C, --count changes or --timeout seconds, then exits with 0. Query RPC Subscribe.",
        examples=["laredo subscribe public.users", "laredo subscribe public.users --replay --json --count 100"],
        handler=run_subscribe)
    subscribe.add_argument("table", type=table_name, metavar="SCHEMA.TABLE")
    subscribe.add_argument("--replay", action="store_true", help="first every existing row as an INSERT")
    subscribe.add_argument("--count", type=positive_int, metavar="N", help="stop after N changes")


def column_list(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError("name at least one column, e.g. --columns id,name")
    return names


def key_values(texts: list[str], typed: bool) -> list[struct_pb2.Value]:
    """Command-line values as google.protobuf.Value: text, or JSON with --typed (a bad one is a usage error)."""
    values = []
    for text in texts:
        if not typed:
            values.append(python_to_value(text))
            continue
        try:
            values.append(python_to_value(json.loads(text)))
        except json.JSONDecodeError as exc:
            raise CliError(f"--typed: {text!r} is not a JSON value ({exc.msg}); quote text as '\"{text}\"'",
                           ExitCode.USAGE) from None
    return values


def run_lookup(ctx: Context) -> None:
    args = ctx.args
    table: TableName = args.table
    values = key_values(args.values, args.typed)
    missing = f"no row of {table} matches {', '.join(args.values)} in {args.index or 'the lookup index'}"
    if not args.all:
        return _show_found(ctx, ctx.query.call("Lookup", query_pb2.LookupRequest(
            schema=table.schema, table=table.table, index_name=args.index, key_values=values)), missing)
    if not args.index:
        raise CliError("--all needs --index NAME: LookupAll reads a named index", ExitCode.USAGE)
    answer = ctx.query.call("LookupAll", query_pb2.LookupAllRequest(
        schema=table.schema, table=table.table, index_name=args.index, key_values=values))
    rows = [struct_to_dict(r) for r in answer.rows]
    _show_rows(ctx, message_to_json(answer), rows)
    if not rows:
        raise Refused(missing)


def run_get(ctx: Context) -> None:
    args = ctx.args
    table: TableName = args.table
    request = query_pb2.GetRowRequest(schema=table.schema, table=table.table,
                                      primary_key_values=key_values(args.key, args.typed))
    if len(args.key) == 1 and _is_int64(args.key[0]):
        request.primary_key = int(args.key[0])  # for services that only read the integer field
    answer = ctx.query.call("GetRow", request)
    _show_found(ctx, answer, f"no row of {table} has primary key {', '.join(args.key)}")


def run_list(ctx: Context) -> None:
    args = ctx.args
    table: TableName = args.table
    token, seen_tokens = args.page_token, set()
    rows: list[dict[str, Any]] = []
    while True:
        answer = ctx.query.call("ListRows", query_pb2.ListRowsRequest(
            schema=table.schema, table=table.table, page_size=args.page_size, page_token=token))
        rows.extend(struct_to_dict(r) for r in answer.rows)
        token = answer.next_page_token
        if not args.all or not token or token in seen_tokens:
            break
        seen_tokens.add(token)
    document = {**message_to_json(answer), "rows": rows}
    _show_rows(ctx, document, rows)
    if not ctx.json:
        more = f"; next page: laredo list {table} --page-token {token}" if token else ""
        ctx.output.line(f"{len(rows)} of {answer.total_count} rows{more}")


def run_count(ctx: Context) -> None:
    table: TableName = ctx.args.table
    answer = ctx.query.call("CountRows", query_pb2.CountRowsRequest(schema=table.schema, table=table.table))
    print_answer(ctx, answer, str(answer.count))


def run_subscribe(ctx: Context) -> ExitCode:
    args = ctx.args
    table: TableName = args.table
    request = query_pb2.SubscribeRequest(schema=table.schema, table=table.table, replay_existing=args.replay)
    return stream_messages(ctx, ctx.query, "Subscribe", request, describe_change, count=args.count,
                           duration=args.timeout)


def describe_change(change: query_pb2.SubscribeResponse) -> str:
    """`<time>  <ACTION>  [at <position>] [xid N]  new={...}  old={...}`."""
    parts = [when(change, "timestamp"), change.action or "-"]
    if change.position:
        parts.append(f"at {change.position}")
    if change.xid:
        parts.append(f"xid {change.xid}")
    if change.HasField("new_values"):
        parts.append(f"new={format_value(struct_to_dict(change.new_values))}")
    if change.HasField("old_values"):
        parts.append(f"old={format_value(struct_to_dict(change.old_values))}")
    return "  ".join(parts)


def _show_found(ctx: Context, answer: Any, missing: str) -> None:
    if ctx.json:
        print_json(ctx, answer)
    elif answer.found:
        row = struct_to_dict(answer.row)
        names = ctx.args.columns or sorted(row)
        ctx.output.lines(render_fields([(name, format_value(row.get(name))) for name in names]))
    if not answer.found:
        raise Refused(missing)


def _show_rows(ctx: Context, document: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    if ctx.json:
        ctx.output.json(document)
    elif rows:
        ctx.output.lines(render_rows(rows, ctx.args.columns, wide=ctx.args.wide))
    else:
        ctx.output.line("(no rows)")


def _is_int64(text: str) -> bool:
    try:
        return -(2**63) <= int(text) < 2**63
    except ValueError:
        return False

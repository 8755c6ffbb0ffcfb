"""Snapshot management over OAM: snapshots list, create, inspect, restore, delete, prune."""

from __future__ import annotations

import argparse

from laredo.v1 import oam_pb2

from laredo_cli.commands.common import (Context, Registrar, add_yes, confirm, positive_int, print_answer, print_json,
                                        report, table_name, text_or_dash, when)
from laredo_cli.output import format_value
from laredo_cli.protojson import struct_to_dict


def register(commands: Registrar) -> None:
    sub = commands.group(
        "snapshots", help="list, create, inspect, restore, delete, prune snapshots",
        description="Snapshots of the replicated tables: OAM RPCs ListSnapshots, CreateSnapshot, "
                    "InspectSnapshot, RestoreSnapshot, DeleteSnapshot, PruneSnapshots. restore, delete and "
                    "prune destroy state: they ask at a terminal and need --yes in scripts.",
        examples=["laredo snapshots list --table public.users",
                  "laredo snapshots create public.users --meta reason=deploy",
                  "laredo snapshots inspect SNAPSHOT_ID", "laredo snapshots prune --keep 5 --yes"])
    listing = sub.add("list", help="available snapshots",
                      description="Available snapshots, newest first. OAM RPC ListSnapshots.", handler=run_list)
    listing.add_argument("--table", type=table_name, metavar="SCHEMA.TABLE", help="only snapshots of this table")
    listing.add_argument("--limit", type=positive_int, default=0, metavar="N", help="at most N snapshots")

    create = sub.add("create", help="take a snapshot now",
                     description="Take a snapshot of the given tables (default: every table), with optional "
                                 "metadata. OAM RPC CreateSnapshot.", handler=run_create)
    create.add_argument("tables", nargs="*", type=table_name, metavar="SCHEMA.TABLE", help="tables (default: all)")
    create.add_argument("--meta", action="append", default=[], type=meta_pair, metavar="KEY=VALUE",
                        help="metadata stored with the snapshot (repeatable; values are strings)")

    inspect = sub.add("inspect", help="one snapshot in detail",
                      description="A snapshot's metadata, positions and tables. OAM RPC InspectSnapshot.",
                      handler=run_inspect)
    inspect.add_argument("snapshot_id", metavar="SNAPSHOT_ID")
    _add_destructive(sub)


def _add_destructive(sub: Registrar) -> None:
    restore = sub.add("restore", help="replace the tables' state with a snapshot",
                      description="DESTRUCTIVE: replace the replicated state with a snapshot's. Needs --yes in "
                                  "scripts. OAM RPC RestoreSnapshot.", handler=run_restore)
    restore.add_argument("snapshot_id", metavar="SNAPSHOT_ID")
    restore.add_argument("--skip-meta-check", action="store_true",
                         help="restore even if the snapshot's metadata does not match the configuration")
    add_yes(restore)

    delete = sub.add("delete", help="delete one snapshot",
                     description="DESTRUCTIVE: delete a snapshot. Needs --yes in scripts; exit code 1 when "
                                 "nothing was deleted. OAM RPC DeleteSnapshot.", handler=run_delete)
    delete.add_argument("snapshot_id", metavar="SNAPSHOT_ID")
    add_yes(delete)

    prune = sub.add("prune", help="delete all but the newest N snapshots",
                    description="DESTRUCTIVE: keep the newest --keep snapshots (of one table with --table) and "
                                "delete the others. Needs --yes in scripts. OAM RPC PruneSnapshots.", handler=run_prune)
    prune.add_argument("--keep", type=positive_int, required=True, metavar="N", help="snapshots to keep")
    prune.add_argument("--table", type=table_name, metavar="SCHEMA.TABLE", help="only this table's snapshots")
    add_yes(prune)


def meta_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key, value


def size_text(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def tables_text(info: oam_pb2.SnapshotInfo) -> str:
    return ", ".join(f"{t.schema}.{t.table} ({t.row_count} rows)" for t in info.tables) or "-"


def run_list(ctx: Context) -> None:
    args = ctx.args
    answer = ctx.oam.call("ListSnapshots", oam_pb2.ListSnapshotsRequest(
        table=str(args.table) if args.table else "", limit=args.limit))
    if ctx.json:
        return print_json(ctx, answer)
    ctx.output.table(
        ["SNAPSHOT", "CREATED", "FORMAT", "SIZE", "TABLES"],
        [[s.snapshot_id, when(s, "created_at"), text_or_dash(s.format),
          size_text(s.size_bytes), tables_text(s)] for s in answer.snapshots],
        right=[3], empty="(no snapshot)")


def run_create(ctx: Context) -> None:
    args = ctx.args
    request = oam_pb2.CreateSnapshotRequest(tables=[str(t) for t in args.tables])
    if args.meta:
        request.user_meta.update(dict(args.meta))
    answer = ctx.oam.call("CreateSnapshot", request)
    what = f"snapshot {answer.snapshot_id}" if answer.snapshot_id else "snapshot"
    report(ctx, answer, answer.accepted, what, [answer.message])


def run_inspect(ctx: Context) -> None:
    answer = ctx.oam.call("InspectSnapshot", oam_pb2.InspectSnapshotRequest(snapshot_id=ctx.args.snapshot_id))
    if ctx.json:
        return print_json(ctx, answer)
    info = answer.info
    ctx.output.fields([
        ("snapshot", info.snapshot_id), ("created", when(info, "created_at")),
        ("format", text_or_dash(info.format)), ("size", size_text(info.size_bytes)),
        ("store", " ".join(filter(None, (info.store_type, info.store_location))) or "-"),
        ("positions", ", ".join(f"{p.source_id} {p.position}" for p in info.source_positions) or "-"),
        *((f"meta {k}", format_value(v)) for k, v in struct_to_dict(info.user_meta).items()),
    ])
    ctx.output.line()
    ctx.output.table(["TABLE", "ROWS", "TARGET"],
                     [[f"{t.schema}.{t.table}", str(t.row_count), text_or_dash(t.target_type)]
                      for t in info.tables], right=[1], empty="(no table)")


def run_restore(ctx: Context) -> None:
    args = ctx.args
    confirm(ctx, f"Restoring snapshot {args.snapshot_id} replaces the current state of its tables.")
    answer = ctx.oam.call("RestoreSnapshot", oam_pb2.RestoreSnapshotRequest(
        snapshot_id=args.snapshot_id, confirm=True, skip_meta_check=args.skip_meta_check))
    lines = [answer.message, *(f"warning: {w}" for w in answer.warnings)]
    report(ctx, answer, answer.accepted, f"restore of snapshot {args.snapshot_id}", lines)


def run_delete(ctx: Context) -> None:
    snapshot_id = ctx.args.snapshot_id
    confirm(ctx, f"Deleting snapshot {snapshot_id} cannot be undone.")
    answer = ctx.oam.call("DeleteSnapshot", oam_pb2.DeleteSnapshotRequest(snapshot_id=snapshot_id))
    print_answer(ctx, answer, f"snapshot {snapshot_id} " + ("deleted" if answer.deleted else "NOT deleted"),
                 refused="" if answer.deleted else f"snapshot {snapshot_id} was not deleted")


def run_prune(ctx: Context) -> None:
    args = ctx.args
    scope = f" of {args.table}" if args.table else ""
    confirm(ctx, f"Pruning deletes every snapshot{scope} but the newest {args.keep}.")
    answer = ctx.oam.call("PruneSnapshots", oam_pb2.PruneSnapshotsRequest(
        keep=args.keep, table=str(args.table) if args.table else ""))
    print_answer(ctx, answer, f"deleted {answer.deleted_count} snapshot(s){scope}, kept the newest {args.keep}")

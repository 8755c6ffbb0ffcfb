"""Administration over OAM: reload, pause, resume, reset, drain."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

from google.protobuf.message import Message
from laredo.v1 import oam_pb2

from laredo_cli.commands.common import Context, Registrar, add_yes, confirm, print_answer, report, seconds, table_name
from laredo_cli.commands.status import service_state
from laredo_cli.output import format_value
from laredo_cli.protojson import struct_to_dict


def register(commands: Registrar) -> None:
    reload = commands.add(
        "reload", help="take a new baseline of a table (or all)",
        description="Ask the ingest leader to take a new baseline of one table (every service then replaces "
                    "its copy), or of every table with --all. --source limits it to one source. Waits for the "
                    "ingest instances' answer; exit code 1 when one of them refused. OAM RPCs ReloadTable, "
                    "ReloadAll.",
        examples=["laredo reload public.users", "laredo reload users --source pg", "laredo reload --all"],
        handler=run_reload)
    what = reload.add_mutually_exclusive_group(required=True)
    what.add_argument("table", nargs="?", type=table_name, metavar="SCHEMA.TABLE", help="the table to reload")
    what.add_argument("--all", action="store_true", help="reload every table")
    reload.add_argument("--source", default="", metavar="ID",
                        help="only this source (default: every source the table comes from)")

    for name, verb, rpc, request in (("pause", "Pause", "PauseSync", oam_pb2.PauseSyncRequest),
                                     ("resume", "Resume", "ResumeSync", oam_pb2.ResumeSyncRequest)):
        parser = commands.add(
            name, help=f"{name} reading from sources",
            description=f"{verb} reading changes from one source (SOURCE or --source) or from every source. "
                        "A paused source keeps its replication slot and position, and services keep "
                        f"serving what they have. Prints the resulting state. OAM RPC {rpc}.",
            examples=[f"laredo {name}", f"laredo {name} pg", f"laredo {name} --source pg"],
            handler=partial(run_source_state, rpc, request))
        which = parser.add_mutually_exclusive_group()
        which.add_argument("source_id", nargs="?", default="", metavar="SOURCE",
                           help="only this source (default: all)")
        which.add_argument("--source", default="", metavar="ID", help="the same, as an option")
    _add_reset(commands)
    _add_drain(commands)


def _add_reset(commands: Registrar) -> None:
    reset = commands.add(
        "reset", help="drop and recreate a source's replication slot",
        description="DESTRUCTIVE: drop and recreate the replication slot of a source (and its publication "
                    "with --drop-publication); every table of the source then takes a new baseline. Asks "
                    "for confirmation at a terminal; scripts must pass --yes (without it: exit code 5). OAM "
                    "RPC ResetSource.",
        examples=["laredo reset pg", "laredo reset pg --drop-publication --yes"], handler=run_reset)
    reset.add_argument("source", metavar="SOURCE", help="the source id")
    reset.add_argument("--drop-publication", action="store_true", help="also drop and recreate the publication")
    add_yes(reset)


def _add_drain(commands: Registrar) -> None:
    drain = commands.add(
        "drain", help="hand one fan-out instance's clients over to other instances",
        description="Drain one fan-out instance (--instance, its fanout.instance_id): its Sync "
                    "clients get a GoAway and move to another instance (resuming by position). One table, or "
                    "every table of the instance without one. OAM refuses to drain the last ready instance of "
                    "a table (its clients would have nowhere to go) unless --force, naming the table's ready "
                    "instances; without --instance every instance serving the table is drained, which "
                    "therefore needs --force. --deadline caps how "
                    "long drained streams are still served. Exit code 1 when no instance drained. OAM RPC "
                    "DrainReplication.",
        examples=["laredo drain --instance fanout-a", "laredo drain public.users --instance fanout-a --deadline 30s",
                  "laredo drain --force"], handler=run_drain)
    drain.add_argument("table", nargs="?", type=table_name, metavar="SCHEMA.TABLE", help="only this table")
    drain.add_argument("--instance", default="", metavar="ID",
                       help="the fan-out instance to drain (default: every instance serving the table)")
    drain.add_argument("--force", action="store_true",
                       help="drain even the last ready instance of a table")
    drain.add_argument("--deadline", type=seconds, default=0, metavar="SECONDS",
                       help="serve drained streams at most this long (default: until clients leave)")


def run_reload(ctx: Context) -> None:
    args = ctx.args
    if args.all:
        answer = ctx.oam.call("ReloadAll", oam_pb2.ReloadAllRequest(source_id=args.source))
        report(ctx, answer, answer.accepted, "reload of every table", [answer.message])
    else:
        answer = ctx.oam.call("ReloadTable", oam_pb2.ReloadTableRequest(
            source_id=args.source, schema=args.table.schema, table=args.table.table))
        report(ctx, answer, answer.accepted, f"reload of {args.table}", [answer.message])


def run_source_state(rpc: str, request: Callable[..., Message], ctx: Context) -> None:
    """pause / resume of the source named as the argument or with --source (argparse refuses both at once); ""
    means every source. Prints the resulting state."""
    answer = ctx.oam.call(rpc, request(source_id=str(ctx.args.source_id or ctx.args.source)))
    print_answer(ctx, answer, f"state: {service_state(answer.state)}")


def run_reset(ctx: Context) -> None:
    args = ctx.args
    extra = " and its publication" if args.drop_publication else ""
    confirm(ctx, f"Resetting source {args.source} drops its replication slot{extra}; every table of it takes "
                 "a new baseline.")
    answer = ctx.oam.call("ResetSource", oam_pb2.ResetSourceRequest(
        source_id=args.source, confirm=True, drop_publication=args.drop_publication))
    details = [f"{name}: {format_value(value)}" for name, value in struct_to_dict(answer.details).items()
               if value not in ({}, [], None, "")]
    report(ctx, answer, answer.accepted, f"reset of source {args.source}", [answer.message, *details])


def run_drain(ctx: Context) -> None:
    args = ctx.args
    table = args.table
    answer = ctx.oam.call("DrainReplication", oam_pb2.DrainReplicationRequest(
        schema=table.schema if table else "", table=table.table if table else "",
        drain_deadline_seconds=math.ceil(args.deadline), instance_id=args.instance, force=args.force))
    where = f"instance {args.instance}" if args.instance else "every instance"
    scope = f"drain of {table} on {where}" if table else f"drain of {where}"
    drained = ", ".join(answer.drained_instances) or str(answer.drained_targets)
    report(ctx, answer, answer.accepted, scope, [answer.message, f"fan-out instances drained: {drained}"])

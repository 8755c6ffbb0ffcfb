"""Dead letters over OAM: dead-letters list, replay, purge."""

from __future__ import annotations

from laredo.v1 import oam_pb2

from laredo_cli.commands.common import (Context, Registrar, add_yes, confirm, positive_int, print_answer, print_json,
                                        text_or_dash, when)
from laredo_cli.output import MAX_CELL, format_value, shorten
from laredo_cli.protojson import struct_to_dict


def register(commands: Registrar) -> None:
    sub = commands.group(
        "dead-letters", help="list, replay, purge changes a pipeline could not apply",
        description="Changes a pipeline could not apply are kept as dead letters. OAM RPCs ListDeadLetters, "
                    "ReplayDeadLetters, PurgeDeadLetters. A pipeline id is "
                    "<source>:<schema>.<table>:<target-type> (see `laredo status`).",
        examples=["laredo dead-letters list pg:public.users:indexed-memory --limit 20",
                  "laredo dead-letters replay pg:public.users:indexed-memory",
                  "laredo dead-letters purge pg:public.users:indexed-memory --yes"])
    listing = sub.add("list", help="a pipeline's dead letters",
                      description="A pipeline's dead letters, oldest first. OAM RPC ListDeadLetters.", handler=run_list)
    listing.add_argument("pipeline", metavar="PIPELINE_ID")
    listing.add_argument("--limit", type=positive_int, default=0, metavar="N", help="at most N entries")

    replay = sub.add("replay", help="deliver a pipeline's dead letters again",
                     description="Deliver a pipeline's dead letters to its target again. Exit code 1 when some "
                                 "still failed. OAM RPC ReplayDeadLetters.", handler=run_replay)
    replay.add_argument("pipeline", metavar="PIPELINE_ID")

    purge = sub.add("purge", help="remove a pipeline's dead letters",
                    description="DESTRUCTIVE: remove every dead letter of a pipeline. Needs --yes in scripts. "
                                "OAM RPC PurgeDeadLetters.", handler=run_purge)
    purge.add_argument("pipeline", metavar="PIPELINE_ID")
    add_yes(purge)


def run_list(ctx: Context) -> None:
    args = ctx.args
    answer = ctx.oam.call("ListDeadLetters", oam_pb2.ListDeadLettersRequest(pipeline_id=args.pipeline,
                                                                            limit=args.limit))
    if ctx.json:
        return print_json(ctx, answer)
    ctx.output.table(
        ["TIME", "ACTION", "POSITION", "ERROR", "CHANGE"],
        [[when(e, "timestamp"), text_or_dash(e.action), text_or_dash(e.position),
          shorten(text_or_dash(e.error_message), MAX_CELL),
          shorten(format_value(struct_to_dict(e.change_data)), MAX_CELL) if e.HasField("change_data") else "-"]
         for e in answer.entries],
        empty="(no dead letter)")
    if answer.total_count > len(answer.entries):
        ctx.output.line(f"showing {len(answer.entries)} of {answer.total_count}")


def run_replay(ctx: Context) -> None:
    pipeline = ctx.args.pipeline
    answer = ctx.oam.call("ReplayDeadLetters", oam_pb2.ReplayDeadLettersRequest(pipeline_id=pipeline))
    print_answer(ctx, answer, f"replayed {answer.replayed} dead letter(s) of {pipeline}: {answer.succeeded} "
                              f"succeeded, {answer.failed} failed",
                 refused=f"{answer.failed} dead letter(s) of {pipeline} failed again" if answer.failed else "")


def run_purge(ctx: Context) -> None:
    pipeline = ctx.args.pipeline
    confirm(ctx, f"Purging removes every dead letter of {pipeline}; they cannot be replayed afterwards.")
    answer = ctx.oam.call("PurgeDeadLetters", oam_pb2.PurgeDeadLettersRequest(pipeline_id=pipeline))
    print_answer(ctx, answer, f"purged {answer.purged} dead letter(s) of {pipeline}")

"""Snapshot replay over OAM: replay start (optionally waiting for the end), status, stop."""

from __future__ import annotations

import argparse
import re
import time

from laredo.v1 import oam_pb2

from laredo_cli.commands.common import (Context, Registrar, duration_text, print_answer, print_json, report, seconds,
                                        table_name)
from laredo_cli.errors import Refused

#: How often `replay start --wait` asks for progress (the API offers no progress stream).
POLL_INTERVAL = 0.5
RUNNING = "running"
_SPEED = re.compile(r"full|realtime|\d+(\.\d+)?x")


def register(commands: Registrar) -> None:
    sub = commands.group(
        "replay", help="replay a snapshot through a target",
        description="Replay a snapshot's rows through targets (all of the snapshot's tables, or the ones "
                    "named; one pipeline with --pipeline). OAM RPCs StartReplay, GetReplayStatus, StopReplay.",
        examples=["laredo replay start SNAPSHOT_ID --speed realtime --wait",
                  "laredo replay start SNAPSHOT_ID public.users --pipeline pg:public.users:http-sync",
                  "laredo replay status REPLAY_ID", "laredo replay stop REPLAY_ID"])
    start = sub.add("start", help="start a replay",
                    description="Start replaying a snapshot and print the replay id. With --wait, follow it to "
                                "its end: exit code 0 when it completed, 1 when it failed or was stopped. OAM "
                                "RPC StartReplay.", handler=run_start)
    start.add_argument("snapshot_id", metavar="SNAPSHOT_ID")
    start.add_argument("tables", nargs="*", type=table_name, metavar="SCHEMA.TABLE",
                       help="only these tables (default: all of the snapshot's)")
    start.add_argument("--pipeline", default="", metavar="ID", help="replay into this pipeline only")
    start.add_argument("--speed", type=speed, default="full", metavar="SPEED",
                       help="full (as fast as possible, default), realtime, or a factor such as 10x")
    start.add_argument("--wait", action="store_true", help="follow the replay until it ends")
    start.add_argument("--poll", type=seconds, default=POLL_INTERVAL, metavar="SECONDS",
                       help=f"with --wait: how often to ask for progress (default {POLL_INTERVAL:g})")

    status = sub.add("status", help="a replay's progress",
                     description="A replay's state (running, completed, error, stopped), rows replayed and time "
                                 "taken. OAM RPC GetReplayStatus.", handler=run_status)
    status.add_argument("replay_id", metavar="REPLAY_ID")

    stop = sub.add("stop", help="stop a replay",
                   description="Stop a running replay. Exit code 1 when it was not stopped (e.g. it had ended). "
                               "OAM RPC StopReplay.", handler=run_stop)
    stop.add_argument("replay_id", metavar="REPLAY_ID")


def speed(text: str) -> str:
    if not _SPEED.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a speed; write full, realtime or a factor like 10x")
    return text


def run_start(ctx: Context) -> None:
    args = ctx.args
    answer = ctx.oam.call("StartReplay", oam_pb2.StartReplayRequest(
        snapshot_id=args.snapshot_id, target_pipeline_id=args.pipeline, speed=args.speed,
        tables=[str(t) for t in args.tables]))
    if not args.wait or not answer.accepted:
        report(ctx, answer, answer.accepted, f"replay {answer.replay_id or 'of ' + args.snapshot_id}",
               [answer.message])
        return
    if not ctx.json:
        ctx.output.note(f"replay {answer.replay_id} started; waiting for it to end (Ctrl-C stops waiting, "
                        "not the replay)")
    try:
        final = _wait(ctx, answer.replay_id, args.poll)
    except KeyboardInterrupt:
        ctx.output.note(f"stopped waiting; replay {answer.replay_id} goes on (laredo replay stop "
                        f"{answer.replay_id} ends it)")
        raise
    _show_status(ctx, final)
    if final.state != "completed":
        raise Refused(f"replay {final.replay_id} ended {final.state}")


def _wait(ctx: Context, replay_id: str, poll: float) -> oam_pb2.GetReplayStatusResponse:
    request = oam_pb2.GetReplayStatusRequest(replay_id=replay_id)
    while True:
        status = ctx.oam.call("GetReplayStatus", request)
        if status.state != RUNNING:
            return status
        time.sleep(poll)


def run_status(ctx: Context) -> None:
    answer = ctx.oam.call("GetReplayStatus", oam_pb2.GetReplayStatusRequest(replay_id=ctx.args.replay_id))
    _show_status(ctx, answer)


def _show_status(ctx: Context, answer: oam_pb2.GetReplayStatusResponse) -> None:
    if ctx.json:
        print_json(ctx, answer)
        return
    ctx.output.fields([("replay", answer.replay_id), ("state", answer.state or "-"),
                       ("rows replayed", str(answer.rows_replayed)), ("elapsed", duration_text(answer.elapsed))])


def run_stop(ctx: Context) -> None:
    replay_id = ctx.args.replay_id
    answer = ctx.oam.call("StopReplay", oam_pb2.StopReplayRequest(replay_id=replay_id))
    print_answer(ctx, answer, f"replay {replay_id} " + ("stopped" if answer.stopped else "NOT stopped"),
                 refused="" if answer.stopped else f"replay {replay_id} was not stopped")

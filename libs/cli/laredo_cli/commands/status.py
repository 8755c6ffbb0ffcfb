"""Status commands over OAM: status, ready, sources, watch."""

from __future__ import annotations

import time
from typing import Any

from laredo.v1 import oam_pb2

from laredo_cli.commands.common import (Context, Registrar, duration_text, print_answer, print_json,
                                        positive_int, seconds, stream_messages, table_name, text_or_dash, when)
from laredo_cli import progress
from laredo_cli.errors import CliError, ExitCode
from laredo_cli.progress import Work
from laredo_cli.output import format_value
from laredo_cli.protojson import message_to_json, struct_to_dict, timestamp_text

SERVICE_STATE = "SERVICE_STATE_"
PIPELINE_STATE = "PIPELINE_STATE_"


def service_state(value: int) -> str:
    return oam_pb2.ServiceState.Name(value).removeprefix(SERVICE_STATE)  # STREAMING for people; JSON keeps it


def pipeline_state(value: int) -> str:
    return oam_pb2.PipelineState.Name(value).removeprefix(PIPELINE_STATE)


def register(commands: Registrar) -> None:
    status = commands.add(
        "status", help="service, source and pipeline status",
        description="The overall state (STARTING, BASELINING, STREAMING, PAUSED, RELOADING, ERROR), every "
                    "source with its positions and lag (- while not known yet), and every pipeline (one per "
                    "table and target) with its state, row count and why its last baseline was taken. --table "
                    "narrows to one table (with its indexes), --pipeline shows one pipeline in full. Long work "
                    "in progress (baselines, restores, replays, snapshot compactions) is listed with a progress "
                    "bar, rows, rate and ETA; --watch redraws it all every few seconds until Ctrl-C or "
                    "--timeout. OAM RPCs GetStatus, GetTableStatus, GetPipelineStatus, ListInstances.",
        examples=["laredo status", "laredo status --table public.users", "laredo status --watch",
                  "laredo status --pipeline pg:public.users:replication-fanout --json"], handler=run_status)
    status.add_argument("--watch", nargs="?", const=2.0, type=seconds, metavar="SECONDS",
                        help="redraw every SECONDS (default 2) with progress bars; with --json one JSON object "
                             "per line: {status, in_progress}")
    which = status.add_mutually_exclusive_group()
    which.add_argument("--table", type=table_name, metavar="SCHEMA.TABLE", help="only this table's pipelines")
    which.add_argument("--pipeline", metavar="ID", help="one pipeline: <source>:<schema>.<table>:<target-type>")

    ready = commands.add(
        "ready", help="is everything (or a source/table/pipeline) ready?",
        description="Readiness: ready when every pipeline in scope is STREAMING (a PAUSED one is not: its "
                    "target serves what it has, but changes made since the pause are not applied). Exit code "
                    "0 when ready, 1 when not (the reasons are printed). OAM RPC CheckReady.",
        examples=["laredo ready && echo serving", "laredo ready --table public.users",
                  "until laredo ready --source pg; do sleep 2; done"], handler=run_ready)
    scope = ready.add_mutually_exclusive_group()
    scope.add_argument("--source", metavar="ID", help="only this source's pipelines")
    scope.add_argument("--table", type=table_name, metavar="SCHEMA.TABLE", help="only this table's pipelines")
    scope.add_argument("--pipeline", metavar="ID", help="only this pipeline")
    _add_sources(commands)
    _add_watch(commands)


def _add_sources(commands: Registrar) -> None:
    sources = commands.add(
        "sources", help="sources with positions, lag and details",
        description="Every source (or one) with its type, current and acknowledged positions, lag and the "
                    "details its ingest leader reports. OAM RPC GetSourceInfo.",
        examples=["laredo sources", "laredo sources pg --json"], handler=run_sources)
    sources.add_argument("source", nargs="?", default="", metavar="SOURCE", help="one source id (default: all)")


def _add_watch(commands: Registrar) -> None:
    watch = commands.add(
        "watch", help="stream status events as they happen",
        description="Print status events one per line (a JSON object per line with --json) as OAM reports "
                    "them: service and pipeline state changes, sources connecting and disconnecting, rows "
                    "applied. Runs until Ctrl-C, --count events or --timeout seconds, and then exits with 0. "
                    "OAM RPC WatchStatus.",
        examples=["laredo watch", "laredo watch --table public.users --count 10",
                  "laredo watch --json --timeout 60 | jq -c 'select(.pipeline_state_change)'"], handler=run_watch)
    watch.add_argument("--table", dest="tables", action="append", type=table_name, default=[],
                       metavar="SCHEMA.TABLE", help="only events of this table (repeatable)")
    watch.add_argument("--pipeline", dest="pipelines", action="append", default=[], metavar="ID",
                       help="only events of this pipeline (repeatable)")
    watch.add_argument("--count", type=positive_int, metavar="N", help="stop after N events")


def run_status(ctx: Context) -> ExitCode | None:
    args = ctx.args
    if args.pipeline:
        answer = ctx.oam.call("GetPipelineStatus", oam_pb2.GetPipelineStatusRequest(pipeline_id=args.pipeline))
        if ctx.json:
            return print_json(ctx, answer)
        show_pipeline(ctx, answer.status, answer.HasField("status"))
        show_indexes(ctx, answer.indexes)
        return None
    if args.table:
        answer = ctx.oam.call("GetTableStatus", oam_pb2.GetTableStatusRequest(schema=args.table.schema,
                                                                             table=args.table.table))
        if ctx.json:
            return print_json(ctx, answer)
        show_pipelines(ctx, answer.pipelines)
        show_indexes(ctx, answer.indexes)
        return None
    if args.watch is not None:
        return watch_status(ctx, args.watch)
    answer = ctx.oam.call("GetStatus", oam_pb2.GetStatusRequest())
    if ctx.json:
        return print_json(ctx, answer)
    show_status(ctx, answer, work_in_progress(ctx, answer))
    return None


def show_status(ctx: Context, answer: oam_pb2.GetStatusResponse, work: list[Work]) -> None:
    summary = [("snapshots", snapshot_summary(answer.snapshot_status))] if answer.HasField("snapshot_status") else []
    ctx.output.fields([("state", service_state(answer.state)), ("started", when(answer, "started_at")),
                       ("last change", when(answer, "last_change_at")), *summary])
    ctx.output.line()
    show_sources(ctx, answer.sources)
    ctx.output.line()
    show_pipelines(ctx, answer.pipelines)
    if work:
        ctx.output.line()
        ctx.output.line("IN PROGRESS")
        ctx.output.lines(progress.lines(work))


def work_in_progress(ctx: Context, answer: oam_pb2.GetStatusResponse) -> list[Work]:
    """Baselines from the sources' reports; restores, replays and compactions from the instances' (none from an
    OAM without ListInstances)."""
    try:
        instances = ctx.oam.call("ListInstances", oam_pb2.ListInstancesRequest()).instances
    except CliError as error:
        if error.exit_code is not ExitCode.UNIMPLEMENTED:
            raise
        instances = []
    return progress.in_progress(
        ((s.source_id, struct_to_dict(s.source_details)) for s in answer.sources),
        ({"service": i.service, "instance_id": i.instance_id, "status": struct_to_dict(i.status)}
         for i in instances), int(time.time() * 1000))


def watch_status(ctx: Context, every: float) -> ExitCode:
    """Redraw the status every `every` seconds until Ctrl-C or --timeout."""
    deadline = time.monotonic() + ctx.args.timeout if ctx.args.timeout else None
    clear = not ctx.json and ctx.output.out.isatty()
    try:
        while True:
            answer = ctx.oam.call("GetStatus", oam_pb2.GetStatusRequest())
            work = work_in_progress(ctx, answer)
            if ctx.json:
                ctx.output.json_line({"status": message_to_json(answer), "in_progress": [w.to_json() for w in work]})
            else:
                if clear:
                    ctx.output.line("\x1b[H\x1b[2J")
                show_status(ctx, answer, work)
                ctx.output.line(f"\n(every {every:g}s; Ctrl-C stops)")
                ctx.output.out.flush()
            if deadline is not None and time.monotonic() + every > deadline:
                return ExitCode.OK
            time.sleep(every)  # a redraw, not a hot path
    except KeyboardInterrupt:
        return ExitCode.OK


def snapshot_summary(summary: oam_pb2.SnapshotSummary) -> str:
    if not summary.enabled:
        return "disabled"
    last = summary.last_snapshot_id or "none yet"
    at = f" at {timestamp_text(summary.last_snapshot_at)}" if summary.HasField("last_snapshot_at") else ""
    return f"{summary.snapshot_count} kept in {summary.store_type or 'store'}; last {last}{at}"


def show_sources(ctx: Context, sources: Any) -> None:
    ctx.output.table(
        ["SOURCE", "TYPE", "POSITION", "ACKED", "LAG BYTES", "LAG TIME"],
        [[s.source_id, text_or_dash(s.source_type), text_or_dash(s.current_position),
          text_or_dash(s.acked_position), str(s.lag_bytes), duration_text(s.lag_time)] for s in sources],
        right=[4, 5], empty="(no source)")


def show_pipelines(ctx: Context, pipelines: Any) -> None:
    ctx.output.table(
        ["PIPELINE", "STATE", "ROWS", "LAST CHANGE", "LAST BASELINE", "ERROR"],
        [[p.pipeline_id, pipeline_state(p.state), str(p.row_count), when(p, "last_change_at"),
          text_or_dash(p.last_baseline_reason), text_or_dash(p.error_message)] for p in pipelines],
        right=[2], empty="(no pipeline)")


def show_pipeline(ctx: Context, p: oam_pb2.PipelineStatus, present: bool) -> None:
    buffer = f"{p.buffer_depth}/{p.buffer_capacity}" if p.buffer_capacity else "-"
    ctx.output.fields([
        ("pipeline", p.pipeline_id), ("source", p.source_id), ("table", f"{p.schema}.{p.table}"),
        ("target", p.target_type), ("state", pipeline_state(p.state)), ("rows", str(p.row_count)),
        ("applied", f"{p.inserts_applied} inserts, {p.updates_applied} updates, {p.deletes_applied} deletes, "
                    f"{p.truncates_applied} truncates"),
        ("last change", when(p, "last_change_at")), ("last baseline", last_baseline(p)),
        ("buffer", buffer), ("dead letters", str(p.dead_letter_count)), ("error", text_or_dash(p.error_message)),
    ] if present else [("pipeline", "-")])


def last_baseline(p: oam_pb2.PipelineStatus) -> str:
    """`<reason>: <detail> (baseline <id>, started <time>)`, or - when the source's ingest reports none."""
    if not p.last_baseline_reason:
        return "-"
    detail = f": {p.last_baseline_detail}" if p.last_baseline_detail else ""
    which = [f"baseline {p.last_baseline_id}"] if p.last_baseline_id else []
    which += [f"started {timestamp_text(p.last_baseline_at)}"] if p.HasField("last_baseline_at") else []
    return f"{p.last_baseline_reason}{detail}" + (f" ({', '.join(which)})" if which else "")


def show_indexes(ctx: Context, indexes: Any) -> None:
    if not indexes:
        return
    ctx.output.line()
    ctx.output.table(["INDEX", "FIELDS", "UNIQUE", "ENTRIES"],
                     [[i.name, ", ".join(i.fields), "yes" if i.unique else "no", str(i.entry_count)]
                      for i in indexes], right=[3])


def run_ready(ctx: Context) -> None:
    args = ctx.args
    answer = ctx.oam.call("CheckReady", oam_pb2.CheckReadyRequest(
        source=args.source or "", table=str(args.table) if args.table else "", pipeline_id=args.pipeline or ""))
    print_answer(ctx, answer, "ready" if answer.ready else "not ready",
                 *(f"  - {reason}" for reason in answer.not_ready_reasons), refused="" if answer.ready else "not ready")


def run_sources(ctx: Context) -> None:
    answer = ctx.oam.call("GetSourceInfo", oam_pb2.GetSourceInfoRequest(source_id=ctx.args.source))
    if ctx.json:
        return print_json(ctx, answer)
    ctx.output.table(
        ["SOURCE", "TYPE", "RESUMES", "ORDERING", "POSITION", "ACKED", "LAG BYTES", "LAG TIME"],
        [[s.source_id, text_or_dash(s.source_type), "yes" if s.supports_resume else "no",
          text_or_dash(s.ordering_guarantee), text_or_dash(s.current_position), text_or_dash(s.acked_position),
          str(s.lag_bytes), duration_text(s.lag_time)] for s in answer.sources],
        right=[6, 7], empty="(no source)")
    for s in answer.sources:
        if s.details.fields:
            ctx.output.line()
            ctx.output.line(f"{s.source_id} details:")
            ctx.output.lines(f"  {k}: {format_value(v)}" for k, v in struct_to_dict(s.details).items())


def run_watch(ctx: Context) -> ExitCode:
    args = ctx.args
    request = oam_pb2.WatchStatusRequest(tables=[str(t) for t in args.tables], pipeline_ids=args.pipelines)
    return stream_messages(ctx, ctx.oam, "WatchStatus", request, describe_event, count=args.count,
                           duration=args.timeout)


def describe_event(event: oam_pb2.WatchStatusResponse) -> str:
    """One line per event: `<time>  <kind>  <what happened>`."""
    at = when(event, "timestamp")
    kind = event.WhichOneof("event")
    if kind == "service_state_change":
        e = event.service_state_change
        text = f"service   {service_state(e.old_state)} -> {service_state(e.new_state)}"
    elif kind == "pipeline_state_change":
        e = event.pipeline_state_change
        text = f"pipeline  {e.pipeline_id} {pipeline_state(e.old_state)} -> {pipeline_state(e.new_state)}"
    elif kind == "source_state_change":
        e = event.source_state_change
        text = f"source    {e.source_id} {e.event_type}" + (f": {e.message}" if e.message else "")
    elif kind == "row_change":
        e = event.row_change
        where = f" at {e.position}" if e.position else ""
        xid = f" xid {e.xid}" if e.xid else ""
        text = f"row       {e.pipeline_id} {e.action} {e.schema}.{e.table}{where}{xid}"
    else:
        text = "unknown   (an event this CLI does not know; use --json to see it)"
    return f"{at}  {text}"

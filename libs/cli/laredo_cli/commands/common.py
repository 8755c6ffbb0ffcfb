"""What every command shares: the context it runs in, table names, confirmation, streaming and formats."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from google.protobuf import duration_pb2
from google.protobuf.message import Message

from laredo_cli.connection import Connections, Service
from laredo_cli.errors import CliError, ExitCode, Refused
from laredo_cli.output import Output
from laredo_cli.protojson import duration_seconds, message_to_json, timestamp_text

DEFAULT_SCHEMA = "public"
_NAME = re.compile(r"[^.\s]+")


@dataclass
class Context:
    """One command's run: its arguments, where it prints, the services, whether a person can answer prompts."""

    args: argparse.Namespace
    output: Output
    connections: Connections
    interactive: bool = False

    @property
    def oam(self) -> Service:
        return self.connections.oam

    @property
    def query(self) -> Service:
        return self.connections.query

    @property
    def json(self) -> bool:
        return self.output.json_mode


@dataclass(frozen=True)
class Registrar:
    """Adds commands to a (sub)command list; every command takes the global options and shows examples."""

    commands: Any  # the action argparse's add_subparsers() returns
    common: list[argparse.ArgumentParser]
    formatter: type[argparse.HelpFormatter]

    def add(self, name: str, *, help: str, description: str,  # noqa: A002 (argparse's name)
            examples: Iterable[str] = (), handler: Callable[[Context], Any] | None = None) -> argparse.ArgumentParser:
        """A command that runs `handler(ctx)` (a group's subcommands have their own)."""
        lines = [f"  {example}" for example in examples]
        parser = self.commands.add_parser(name, parents=self.common, formatter_class=self.formatter, help=help,
                                          description=description,
                                          epilog="examples:\n" + "\n".join(lines) if lines else None)
        if handler is not None:
            parser.set_defaults(handler=handler)
        return parser

    def group(self, name: str, *, help: str, description: str,  # noqa: A002
              examples: Iterable[str] = ()) -> Registrar:
        """A command with subcommands (`laredo snapshots list`); returns the registrar of its subcommands."""
        parser = self.add(name, help=help, description=description, examples=examples)
        sub = parser.add_subparsers(dest=f"{name.replace('-', '_')}_command", metavar="SUBCOMMAND", required=True)
        return Registrar(sub, self.common, self.formatter)


@dataclass(frozen=True, slots=True)
class TableName:
    schema: str
    table: str

    def __str__(self) -> str:
        return f"{self.schema}.{self.table}"


def table_name(text: str) -> TableName:
    """`schema.table`, or `table` in the public schema (an argparse type: errors are usage errors)."""
    parts = text.split(".")
    if len(parts) == 1:
        parts = [DEFAULT_SCHEMA, parts[0]]
    if len(parts) != 2 or not all(_NAME.fullmatch(p) for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r} is not a table name; write schema.table (e.g. public.users) "
                                         "or a table of the public schema (users)")
    return TableName(parts[0], parts[1])


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return value


def seconds(text: str) -> float:
    """A duration in seconds: `30`, `2.5`, or with a unit: `500ms`, `10s`, `5m`, `1h`."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*", text)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration; write seconds (30, 2.5) or 500ms, 10s, "
                                         "5m, 1h")
    factor = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[match.group(2)]
    return float(match.group(1)) * factor


def add_yes(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-y", "--yes", "--confirm", dest="yes", action="store_true",
                        help="carry out this destructive command without asking (required when not run "
                             "from a terminal)")


def confirm(ctx: Context, what: str) -> None:
    """Go on if --yes was given or a person at a terminal types `yes`; else fail with exit code 5."""
    if ctx.args.yes:
        return
    if ctx.interactive:
        ctx.output.err.write(f"{what}\nType 'yes' to continue: ")
        ctx.output.err.flush()
        try:
            answer = input()
        except EOFError:
            answer = ""
        if answer.strip().lower() in ("yes", "y"):
            return
        raise CliError("not confirmed; nothing was done", ExitCode.PRECONDITION)
    raise CliError(f"{what} Refusing without confirmation: add --yes to carry it out.", ExitCode.PRECONDITION)


def stream_messages(ctx: Context, service: Service, method: str, request: Message,
                    show: Callable[[Any], str], *, count: int | None, duration: float | None) -> ExitCode:
    """Print each message of a server stream (a JSON line each with --json) until `count` messages,
    `duration` seconds, the server's end of the stream, or Ctrl-C; all of these end with exit code 0."""
    call = service.stream(method, request, duration=duration)
    try:
        for seen, message in enumerate(service.messages(call, duration=duration), 1):
            if ctx.json:
                ctx.output.json_line(message_to_json(message))
            else:
                ctx.output.stream_line(show(message))
            if count is not None and seen >= count:
                break
    except KeyboardInterrupt:
        pass
    finally:
        call.cancel()
    return ExitCode.OK


def when(message: Message, field: str) -> str:
    """The Timestamp `field` of `message` as RFC 3339 text, or - when it is unset."""
    return timestamp_text(getattr(message, field)) if message.HasField(field) else "-"


def duration_text(duration: duration_pb2.Duration) -> str:
    return f"{duration_seconds(duration):g}s"


def text_or_dash(value: Any) -> str:
    return str(value) if value not in ("", None) else "-"


def print_json(ctx: Context, message: Message) -> None:
    ctx.output.json(message_to_json(message))


def print_answer(ctx: Context, answer: Message, *lines: str, refused: str = "") -> None:
    """The answer as JSON with --json, else `lines` for people; then, when `refused` says why the server
    answered no, exit code 1 with that message."""
    if ctx.json:
        print_json(ctx, answer)
    else:
        ctx.output.lines(lines)
    if refused:
        raise Refused(refused)


def report(ctx: Context, answer: Message, accepted: bool, what: str, lines: list[str]) -> None:
    """Print an administrative answer; exit code 1 when it was not accepted."""
    why = f"{what} was not accepted" + (f": {lines[0]}" if lines and lines[0] else "")
    print_answer(ctx, answer, f"{what}: {'accepted' if accepted else 'NOT accepted'}",
                 *(f"  {line}" for line in lines if line), refused="" if accepted else why)

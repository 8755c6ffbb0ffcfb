"""`laredo`: the command line over the OAM and Query services (parser, dispatch, exit codes)."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import textwrap
from collections.abc import Mapping, Sequence
from typing import TextIO

from laredo_cli.commands import admin, catalog, dead_letters, query, replay, snapshots, status
from laredo_cli.commands.common import Context, Registrar, seconds
from laredo_cli.connection import DEFAULT_TIMEOUT, Connections, Endpoint
from laredo_cli.errors import EXIT_CODE_HELP, CliError, ExitCode
from laredo_cli.output import Output
from laredo_cli.security import (CA_ENV, CERT_ENV, KEY_ENV, TLS_ENV, TOKEN_ENV, TOKEN_FILE_ENV, add_security_options,
                                 security_from)

PROG = "laredo"
OAM_ENV, QUERY_ENV = "LAREDO_SERVER", "LAREDO_QUERY_SERVER"
DEFAULT_OAM = "localhost:4001"
#: Without --query-server, Query calls go to the OAM address, which answers the Query service too.
DEFAULT_QUERY = "the OAM address"
COMMAND_MODULES = (status, catalog, admin, query, snapshots, dead_letters, replay)

DESCRIPTION = ("Operate Laredo from a terminal or a script: status and administration through the OAM service "
               "(laredo-oam, TableSyncOAM) and reads of the replicated tables through the Query service "
               "(laredo-query, TableSyncQuery). Output is a table for people; --json prints JSON for scripts.")

EPILOG = f"""\
addresses:
  --server / ${OAM_ENV}              OAM service, default {DEFAULT_OAM} (oam.grpc.port)
  --query-server / ${QUERY_ENV}  Query service, default {DEFAULT_QUERY} (OAM answers Query
                                     through the ready query instances; name one for direct reads)
  (lookup, get, list, count and subscribe use the Query service; every other command uses OAM)
  https://HOST:PORT means TLS with the system's CAs

security (the same for both services; an option wins over its variable; the token is never printed):
  token:  --token-file FILE / ${TOKEN_FILE_ENV}, or --token TOKEN / ${TOKEN_ENV}
  TLS:    --tls / ${TLS_ENV}=1, --ca FILE / ${CA_ENV}, --cert FILE --key FILE / ${CERT_ENV} ${KEY_ENV}

tables are written schema.table, or just table for the public schema.
every option can also follow the command: laredo status --json --server oam:4001

{EXIT_CODE_HELP}

examples:
  laredo status                              overall state, sources and pipelines
  laredo tables                              configured tables
  laredo schema public.users                 a table's columns
  laredo watch --count 10                    the next 10 status events
  laredo reload public.users                 new baseline of one table
  laredo reset pg --yes                      recreate the replication slot of source pg
  laredo get public.users 42 --json          one row by primary key, as JSON
  laredo list public.users --all --json      every row
  laredo lookup public.users alice@example.com
  export {OAM_ENV}=oam.internal:4001 {QUERY_ENV}=query.internal:4003
  laredo status --server https://oam.internal:4001 --ca ca.pem --token-file ~/.laredo/token

'laredo COMMAND --help' explains a command and shows examples."""


class _Formatter(argparse.HelpFormatter):
    """Wraps one-paragraph descriptions to the terminal; keeps texts with line breaks (epilogs) as written."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32, width=min(shutil.get_terminal_size((100, 24)).columns, 110))

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        paragraph = " ".join(text.split())
        return textwrap.fill(paragraph, width, initial_indent=indent, subsequent_indent=indent,
                             break_on_hyphens=False)


def _add_global_options(parser: argparse.ArgumentParser, env: Mapping[str, str], *, inherited: bool) -> None:
    """The options every command takes. On commands they default to SUPPRESS, so a value given before the
    command is kept when none is given after it."""

    def default(value: object) -> object:
        return argparse.SUPPRESS if inherited else value

    group = parser.add_argument_group("global options")
    group.add_argument("--server", metavar="HOST:PORT", default=default(env.get(OAM_ENV) or DEFAULT_OAM),
                       help=f"OAM service address (env {OAM_ENV}; default {DEFAULT_OAM})")
    group.add_argument("--query-server", metavar="HOST:PORT", default=default(env.get(QUERY_ENV) or None),
                       help=f"Query service address (env {QUERY_ENV}; default {DEFAULT_QUERY}, which answers "
                            "Query calls through the query instances that are ready)")
    group.add_argument("--json", action="store_true", default=default(False),
                       help="print JSON (one object per line for watch and subscribe)")
    group.add_argument("--timeout", type=seconds, default=default(None), metavar="SECONDS",
                       help=f"wait at most this long for an answer (default {DEFAULT_TIMEOUT:g}s); for watch "
                            "and subscribe: stop after this long (default: until Ctrl-C)")
    add_security_options(group, default)


def query_address(args: argparse.Namespace) -> str:
    """The Query service's address: --query-server, else the OAM address (one address for operators)."""
    return str(args.query_server or args.server)


def build_parser(env: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    env = os.environ if env is None else env
    parser = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION, epilog=EPILOG, formatter_class=_Formatter)
    _add_global_options(parser, env, inherited=False)
    common = argparse.ArgumentParser(add_help=False)
    _add_global_options(common, env, inherited=True)
    commands = Registrar(parser.add_subparsers(dest="command", metavar="COMMAND", title="commands", required=True),
                         [common], _Formatter)
    for module in COMMAND_MODULES:
        module.register(commands)
    return parser


def run(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None,
        env: Mapping[str, str] | None = None, interactive: bool | None = None) -> int:
    """Parse `argv`, run the command, return its exit code. Streams and environment are injectable for tests;
    argparse itself prints usage errors to sys.stderr and exits with 2."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    env = os.environ if env is None else env
    args = build_parser(env).parse_args(argv)
    connections: Connections | None = None
    try:
        connections = Connections.to(
            Endpoint("OAM service", args.server, f"--server or {OAM_ENV}"),
            Endpoint("Query service", query_address(args), f"--query-server or {QUERY_ENV}"), args.timeout,
            security_from(args, env))
        if interactive is None:
            interactive = sys.stdin.isatty() and err.isatty()
        code = args.handler(Context(args, Output(out, err, args.json), connections, interactive))
        return int(code if code is not None else ExitCode.OK)
    except CliError as error:
        out.flush()
        print(f"{PROG}: {error.message}", file=err)
        return int(error.exit_code)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=err)
        return int(ExitCode.INTERRUPTED)
    finally:
        if connections is not None:
            connections.close()


def main() -> None:
    """The console script `laredo`."""
    try:
        code = run()
        sys.stdout.flush()
    except BrokenPipeError:
        # `laredo list ... | head` closed the pipe: not an error of ours. Silence the flush at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = int(ExitCode.OK)
    sys.exit(code)


if __name__ == "__main__":
    main()

"""The command line shared by every service: --config, --set, --log-level; signals end the run cleanly."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable

from laredo_core.config import LaredoSettings, load_settings
from laredo_core.errors import ConfigError, LaredoError

log = logging.getLogger(__name__)

#: Exit codes scripts can rely on.
EXIT_OK, EXIT_FAILURE, EXIT_CONFIG = 0, 1, 2


def parse_args(prog: str, description: str, argv: list[str] | None = None,
               extend: Callable[[argparse.ArgumentParser], None] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--config", default=os.environ.get("LAREDO_CONFIG"),
                        help="HOCON configuration file (default: $LAREDO_CONFIG)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override one configuration key, e.g. --set stream.nats_url=nats://nats:4222")
    parser.add_argument("--log-level", default=os.environ.get("LAREDO_LOG_LEVEL", "info"),
                        choices=("debug", "info", "warning", "error"))
    parser.add_argument("--check-config", action="store_true",
                        help="validate the configuration, print 'config is valid' and exit")
    if extend:
        extend(parser)
    return parser.parse_args(argv)


def run_service(prog: str, description: str, main: Callable[[LaredoSettings, argparse.Namespace, asyncio.Event],
                Awaitable[None]], argv: list[str] | None = None,
                extend: Callable[[argparse.ArgumentParser], None] | None = None,
                validate: Callable[[LaredoSettings, argparse.Namespace], object] | None = None) -> int:
    """Parse arguments, load settings, run `main` until it returns or SIGTERM/SIGINT sets the stop event.

    `validate` checks the service's own configuration (raising ConfigError) before anything starts, so
    --check-config covers it too.
    """
    args = parse_args(prog, description, argv, extend)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not args.config:
        print(f"{prog}: no configuration: pass --config PATH or set LAREDO_CONFIG", file=sys.stderr)
        return EXIT_CONFIG
    try:
        settings = load_settings(args.config, sets=args.set)
        if validate is not None:
            validate(settings, args)
    except ConfigError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if args.check_config:
        print("config is valid")
        return EXIT_OK

    async def runner() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await main(settings, args, stop)

    try:
        asyncio.run(runner())
    except ConfigError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except LaredoError as exc:
        log.error("%s stopped: %s", prog, exc)
        return EXIT_FAILURE
    return EXIT_OK

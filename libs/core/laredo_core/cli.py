"""The command line shared by every service: --config, --set, --log-level; signals end the run cleanly."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import logging
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable

from laredo_core.config import LaredoSettings, load_settings, load_tree
from laredo_kernel.errors import ConfigError, LaredoError
from laredo_core.redaction import Redactor, activate, install_log_filter, scrub

log = logging.getLogger(__name__)

#: Exit codes scripts can rely on.
EXIT_OK, EXIT_FAILURE, EXIT_CONFIG = 0, 1, 2
#: Seconds a service has to stop once told to (SIGTERM, SIGINT), unless it says otherwise (run_service's stop_grace):
#: then what it still waits on is cancelled; CANCEL_GRACE later the process ends whatever it is doing.
STOP_GRACE = 15.0
CANCEL_GRACE = 5.0


def parse_args(prog: str, description: str, argv: list[str] | None = None,
               extend: Callable[[argparse.ArgumentParser], None] | None = None,
               workers: bool = False) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--config", default=os.environ.get("LAREDO_CONFIG"),
                        help="HOCON configuration file (default: $LAREDO_CONFIG)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override one configuration key, e.g. --set stream.nats_url=nats://nats:4222")
    parser.add_argument("--log-level", default=os.environ.get("LAREDO_LOG_LEVEL", "info"),
                        choices=("debug", "info", "warning", "error"))
    parser.add_argument("--check-config", action="store_true",
                        help="validate the configuration, print 'config is valid' and exit")
    if workers:
        parser.add_argument("--workers", type=int, default=int(os.environ.get("LAREDO_WORKERS", "1")),
                            metavar="N", help="run N processes of the service on its port, each a whole "
                                              "instance (SO_REUSEPORT; default: $LAREDO_WORKERS or 1)")
        parser.add_argument("--worker-index", type=int, default=None, help=argparse.SUPPRESS)
    if extend:
        extend(parser)
    return parser.parse_args(argv)


def run_service(prog: str, description: str, main: Callable[[LaredoSettings, argparse.Namespace, asyncio.Event],
                Awaitable[None]], argv: list[str] | None = None,
                extend: Callable[[argparse.ArgumentParser], None] | None = None,
                validate: Callable[[LaredoSettings, argparse.Namespace], object] | None = None,
                stop_grace: Callable[[LaredoSettings, argparse.Namespace], float] | None = None,
                workers: str = "") -> int:
    """Parse arguments, load settings, run `main` until it returns or SIGTERM/SIGINT sets the stop event.

    `validate` checks the service's own configuration (raising ConfigError) before anything starts, so
    --check-config covers it too. `stop_grace`: the seconds `main` has to return once the stop event is set
    (default STOP_GRACE; see _run_until_stopped). `workers`: the configuration section of the service's endpoint
    (fanout, query) when it can run as several processes on one port (`--workers N`, see laredo_core.workers).

    Secrets never leave (laredo_core.redaction): once the file is read, every configured secret value is known
    to the process's Redactor; log lines (message, exception, stack) and what is printed are scrubbed with it.
    """
    args = parse_args(prog, description, argv, extend, workers=bool(workers))
    worker = f"[worker {args.worker_index}] " if getattr(args, "worker_index", None) is not None else ""
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format=f"%(asctime)s %(levelname)s {worker}%(name)s: %(message)s")
    install_log_filter()
    if not args.config:
        print(f"{prog}: no configuration: pass --config PATH or set LAREDO_CONFIG", file=sys.stderr)
        return EXIT_CONFIG
    try:
        settings = load_settings(args.config, sets=args.set)
        activate(Redactor.from_tree(settings.raw))
        if validate is not None:
            validate(settings, args)
    except ConfigError as exc:
        _know_secrets_of(args)
        print(f"{prog}: {scrub(str(exc))}", file=sys.stderr)
        return EXIT_CONFIG
    if args.check_config:
        print("config is valid")
        return EXIT_OK

    grace = stop_grace(settings, args) if stop_grace is not None else STOP_GRACE
    if workers and args.workers < 1:
        print(f"{prog}: --workers must be 1 or more, got {args.workers}", file=sys.stderr)
        return EXIT_CONFIG

    async def runner() -> None:
        stop = asyncio.Event()
        if workers and args.workers > 1:
            from laredo_core.workers import KILL_AFTER, WorkerPlan, run_workers  # the launcher only

            plan = WorkerPlan(main.__module__, workers, args.workers, sys.argv[1:] if argv is None else argv, grace)
            work = run_workers(prog, plan, getattr(settings, workers), stop, settings.front_door.tls)
            await _run_until_stopped(prog, work, stop, grace + KILL_AFTER)
        else:
            await _run_until_stopped(prog, main(settings, args, stop), stop, grace)

    try:
        asyncio.run(runner())
    except ConfigError as exc:
        print(f"{prog}: {scrub(str(exc))}", file=sys.stderr)
        return EXIT_CONFIG
    except LaredoError as exc:
        log.error("%s stopped: %s", prog, exc)
        return EXIT_FAILURE
    except Exception:
        # Logged rather than left to the interpreter, whose traceback would bypass the log filter.
        log.critical("%s crashed", prog, exc_info=True)
        return EXIT_FAILURE
    return EXIT_OK


def _know_secrets_of(args: argparse.Namespace) -> None:
    """Learn the secrets of a file that failed validation, so its error messages can be scrubbed; a file that
    cannot even be parsed leaves the rule alone (URL and key=value credentials are still redacted)."""
    with contextlib.suppress(ConfigError):
        activate(Redactor.from_tree(load_tree(args.config, sets=args.set)))


async def _run_until_stopped(prog: str, work: Awaitable[None], stop: asyncio.Event, grace: float) -> None:
    """Run `work`; once a signal sets `stop`, give it `grace` seconds, then cancel it (a second signal: at once),
    and end the process CANCEL_GRACE later if it still has not returned (a call that ignores cancellation, a
    thread blocked on a dead connection)."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(work)
    signals = 0

    def on_signal(sig: signal.Signals) -> None:
        nonlocal signals
        signals += 1
        if signals == 1:
            log.info("%s: %s received; stopping (at most %gs)", prog, sig.name, grace)
            stop.set()
            _exit_after(prog, grace + CANCEL_GRACE)
        else:
            log.warning("%s: %s received again; stopping now", prog, sig.name)
            task.cancel()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait((task, stopped), return_when=asyncio.FIRST_COMPLETED)
        if not task.done():
            await asyncio.wait((task,), timeout=grace)
        forced = signals > 1
        if not task.done():
            log.error("%s did not stop within %gs of being told to; cancelling what it still waits for:\n%s", prog,
                      grace, _stack_of(task))
            task.cancel()
            forced = True
        if forced:
            with contextlib.suppress(asyncio.CancelledError):
                await task
            raise LaredoError("it was stopped before it could finish stopping (what it waited for was cancelled)")
        await task
    finally:
        stopped.cancel()


def _stack_of(task: asyncio.Future[None]) -> str:
    """Where every task of the service waits (the main one's wait alone is usually a gather)."""
    out = io.StringIO()
    for each in asyncio.all_tasks():
        if each is not asyncio.current_task():
            each.print_stack(limit=4, file=out)
    return out.getvalue()


def _exit_after(prog: str, seconds: float) -> None:
    """A last resort beyond the event loop's reach: end the process if it is still running after `seconds`."""

    def end() -> None:
        log.critical("%s still running %gs after being told to stop; exiting now", prog, seconds)
        logging.shutdown()
        os._exit(EXIT_FAILURE)

    timer = threading.Timer(seconds, end)
    timer.daemon = True
    timer.start()

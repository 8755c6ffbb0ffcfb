"""Fault-injection soak: the chaos harness of tests/chaos for as long as asked.

Real PostgreSQL, NATS (one node, or with --cluster a 3-node cluster whose stream leader is killed too), Redis,
ingest, two fan-outs and the query service as processes; a seeded workload and a seeded plan of faults;
library clients whose every stream is checked for protocol violations; at the end every replica and the query
service must equal SELECT *. Prints the seed, every step with its time, and the result; exits 1 on failure.
The same seed replays the same workload and fault plan (the timing of the processes differs).

Usage: .venv/bin/python bench/chaos.py [--minutes 10] [--seed S] [--cluster] [--rate 150] [--keep DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.chaos.harness import ChaosSettings  # noqa: E402
from tests.chaos.soak import run_chaos  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=None,
                        help="length of the plan (default: the short run of the test suite, every step once)")
    parser.add_argument("--seed", type=int, default=None, help="default: a random one (printed)")
    parser.add_argument("--cluster", action="store_true", help="a 3-node NATS cluster, streams with 3 replicas")
    parser.add_argument("--rate", type=float, default=150.0, help="changes/s of the small transactions")
    parser.add_argument("--converge-timeout", type=float, default=180.0,
                        help="seconds the replicas get to equal SELECT * once the writer and the faults stopped")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep logs and configs in this directory (default: a temporary one, removed on "
                             "success)")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 10**6)
    work = args.keep or Path(tempfile.mkdtemp(prefix=f"laredo-chaos-{seed}-"))
    work.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("laredo_client", "laredo_testing"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    print(f"chaos seed {seed}; work directory {work}", flush=True)
    report = asyncio.run(run_chaos(ChaosSettings(seed=seed, work_dir=work, minutes=args.minutes,
                                                 cluster=args.cluster, rate=args.rate,
                                                 converge_timeout=args.converge_timeout)))
    print(report.render(), flush=True)
    if report.failed:
        print(f"logs kept in {work}")
        return 1
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

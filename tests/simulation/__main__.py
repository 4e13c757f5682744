"""`make simulate N=1000 SEED=…`: run the schedules, print a failure's seed and shrunk schedule, then one JSON line.

The JSON line (last on standard output) is also written, with its provenance, to
benchmarks/results/simulate.json. Exit status 1 when an invariant broke.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

from benchmarks.provenance import write_results
from tests.simulation.machines import Profile
from tests.simulation.run import MACHINES, simulate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.simulation", description=__doc__)
    parser.add_argument("-n", "--schedules", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=None, help="replay: the seed a run printed")
    parser.add_argument("--only", action="append", choices=sorted(MACHINES), help="one machine (repeatable)")
    parser.add_argument(
        "--stall-s",
        type=float,
        default=Profile.stall_s,
        help="longest a party may be in flight before it is killed (the lease assumes < 60)",
    )
    parser.add_argument("--retries", action="store_true", help="users retry failed tenant jobs too")
    parser.add_argument("--batches", action="store_true", help="tenants submit batches beside their jobs")
    parser.add_argument("--no-write", action="store_true", help="do not write the results file")
    parser.add_argument(
        "--results", default="simulate.json", help="the results file in benchmarks/results/ (another profile's run)"
    )
    args = parser.parse_args(argv)
    profile = Profile(stall_s=args.stall_s, retries=args.retries, batches=args.batches)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    print(f"seed {seed}", file=sys.stderr, flush=True)  # first, so a run that dies still says how to replay it
    report = simulate(args.schedules, seed, only=tuple(args.only or MACHINES), profile=profile)
    for violation in report.violations:
        print(f"VIOLATION in {violation.machine} (seed {report.seed}, first found after "
              f"{violation.found_after} schedules): {violation.invariant}", file=sys.stderr)  # fmt: skip
        print("minimal schedule:", *violation.schedule, sep="\n  ", file=sys.stderr)
        print(f"replay: {_replay(args, seed)}", file=sys.stderr)
    line = report.as_json()
    # Printed before it is written: a long run's line must outlive a file it could not write.
    print(json.dumps(line), flush=True)
    if not args.no_write:
        config = {"schedules": args.schedules, "only": sorted(args.only or MACHINES), "stall_s": args.stall_s,
                  "retries": args.retries, "batches": args.batches}  # fmt: skip
        # A name under benchmarks/results/; a path given there (benchmarks/results/x.json) means the same file.
        write_results(Path(args.results).name, line, config)
    return 1 if report.violations else 0


def _replay(args: argparse.Namespace, seed: int) -> str:
    """The command that replays this run: `make simulate` when it ran with the defaults, else its own flags."""
    flags = [f"--only {name}" for name in args.only or ()]
    flags += [f"--stall-s {args.stall_s:g}"] if args.stall_s != Profile.stall_s else []
    flags += ["--retries"] * args.retries + ["--batches"] * args.batches
    if not flags:
        return f"make simulate N={args.schedules} SEED={seed}"
    return f".venv/bin/python -m tests.simulation -n {args.schedules} --seed {seed} {' '.join(flags)}"


if __name__ == "__main__":
    sys.exit(main())

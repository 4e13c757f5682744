"""`python -m benchmarks.parity --target FILE --options JSON [--source FILE…] [--segments N | --cut-at F,…]`

Renders the target twice with the same options and the harness's stand-in models: once with
FaceFusion 3.8.1's own `headless-run` on this machine, once through a local farm of its own (warm
FaceFusion workers, cut into exactly N segments or at the frames given), and compares the two
(benchmarks/parity/judge.py; `--layout` lets it read every face, `--keep DIR` keeps `facefusion.mp4`,
`farm.mp4` and the layout). Prints a
short account, then one JSON line last: {"equal": …, "frames": […], "min_psnr": …, "audio": …,
"differences": […], …}. Exits 0 only when they are equal; 2 when it could not render one side.

`--steps JSON` (a list of option sets, each with `"sources": ["a"|"b", …]`, the harness's people whose
faces are its sources) makes it a job: FaceFusion's own `job-create`, `job-add-step` (step 1),
`job-remix-step` (each later step, on the one before's output) and `job-run`, against the farm's render
of the job file FaceFusion wrote (benchmarks/parity/job_files.py); `--options` is then not used.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from benchmarks.parity.clips import write_source
from benchmarks.parity.farm import Farm
from benchmarks.parity.job_files import Step, run_job_case
from benchmarks.parity.judge import Layout
from benchmarks.parity.run import Case, run_case
from fleetctl.harness import facefusion as harness


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.parity", description=__doc__.split("\n\n")[1])
    parser.add_argument("--target", type=Path, required=True, help="the video to render")
    parser.add_argument("--options", default="{}", help="the job's options as JSON, in FaceFusion's names")
    parser.add_argument("--source", type=Path, action="append", default=[],
                        help="a source face (or audio); the harness's face when none")  # fmt: skip
    parser.add_argument(
        "--segments",
        type=int,
        default=3,
        help="the segments the farm cuts it into (its manifest's plan; any clip of 2N frames or more)",
    )
    parser.add_argument(
        "--cut-at",
        default="",
        help="comma-separated target frames the farm's segments start at (instead of --segments)",
    )
    parser.add_argument("--facefusion-options", default="{}",
                        help="options for FaceFusion's own run only, as JSON (e.g. a workflow strategy)")  # fmt: skip
    parser.add_argument("--steps", help="a job's steps as a JSON list of option sets, each with its sources' people")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="keep both renders in this folder")
    parser.add_argument("--layout", type=Path,
                        help="where the harness drew its people in the target (JSON, benchmarks.parity.judge.Layout):"
                        " the judge then reads every face's code and colour")  # fmt: skip
    return parser.parse_args(argv)


def _step(work: Path, options: dict[str, object]) -> Step:
    """A step of `--steps`: its people's pictures written as its sources, the rest its options."""
    people = options.pop("sources", ["a"])
    assert isinstance(people, list), "a step's sources are a list of the harness's people"
    return Step(tuple(write_source(work / f"source-{person}.png", str(person)) for person in people), options)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    reason = harness.skip_reason()
    if reason is not None:
        print(reason, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="parity-") as scratch:
        work = args.keep or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        sources = args.source or [write_source(work / "source.png")]
        case = Case(name="cli", options=json.loads(args.options),
                    facefusion_options=json.loads(args.facefusion_options), segments=args.segments,
                    cut_at=tuple(int(frame) for frame in args.cut_at.split(",") if frame.strip()))  # fmt: skip
        home = harness.prepare(work / "harness")
        with Farm(home, work / "farm", workers=args.workers) as farm:
            layout = Layout.load(args.layout) if args.layout else None
            if args.steps:
                steps = [_step(work, dict(options)) for options in json.loads(args.steps)]
                outcome = run_job_case("job", home, farm, steps, args.target.resolve(), work, layout, args.segments)
            else:
                outcome = run_case(case, home, farm, sources, args.target.resolve(), work, layout)
    print(outcome.account())
    print(json.dumps(outcome.line()))
    return 0 if outcome.equal else (2 if outcome.unrendered else 1)


if __name__ == "__main__":
    raise SystemExit(main())

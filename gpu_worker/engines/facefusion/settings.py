"""Where FaceFusion lives and how the engine runs it, read from the environment once per worker
(its variables: fusionfleet/environment/facefusion.py, declared in the settings table)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from fusionfleet.environment.contract import EnvironmentInvalid, from_env, names
from fusionfleet.environment.facefusion import FaceFusionEnvironment
from fusionfleet.environment.settings import (
    CUDA_VISIBLE_DEVICES,
    FUSIONFLEET_FACEFUSION_HOME,
    FUSIONFLEET_FACEFUSION_MODE,
)
from gpu_worker.engines.base import EngineUnavailable

# warm: one FaceFusion process per engine, frames in memory (warm.py); per-segment: one
# `headless-run` per segment (engine.py), kept selectable while both exist.
MODES = ("warm", "per-segment")
DEFAULT_MODE = FaceFusionEnvironment.mode

# Generous for model loading and any GPU the fleet runs, but below the worker's own limit for the
# whole segment (gpu_worker/hosting/engine_host.py HostPolicy: 120 s + 2 s a frame), so a hung FaceFusion
# ends with its own last words rather than with its engine process killed.
DEFAULT_TIMEOUT_BASE_S: float = FaceFusionEnvironment.timeout_base_s
DEFAULT_TIMEOUT_PER_FRAME_S: float = FaceFusionEnvironment.timeout_per_frame_s
# Up to this much uncompressed output FaceFusion writes losslessly (rawvideo); above it, x264 at
# quality 100 keeps the scratch disk in bounds (FaceFusion's final concat copies the file once).
DEFAULT_RAW_OUTPUT_LIMIT_BYTES: int = FaceFusionEnvironment.raw_output_limit_bytes


@dataclass(frozen=True)
class EngineSettings:
    home: Path | None
    python: str
    gpu_device: int | None = None
    worker_index: int | None = None
    thread_count: int | None = None
    visible_devices: str | None = None
    timeout_base_s: float = DEFAULT_TIMEOUT_BASE_S
    timeout_per_frame_s: float = DEFAULT_TIMEOUT_PER_FRAME_S
    raw_output_limit_bytes: int = DEFAULT_RAW_OUTPUT_LIMIT_BYTES
    scratch: Path | None = None  # where the warm engine keeps its inputs and FaceFusion's log

    def timeout_s(self, frames: int) -> float:
        """How long one run over `frames` frames may take before it counts as hung."""
        return self.timeout_base_s + frames * self.timeout_per_frame_s


def settings_from_env(env: Mapping[str, str]) -> EngineSettings:
    # Each variable stripped first: a blank one counts as unset, as it always has here.
    try:
        read = from_env(
            FaceFusionEnvironment, {name: env.get(name, "").strip() for name in names(FaceFusionEnvironment)}
        )
    except EnvironmentInvalid as problem:
        raise EngineUnavailable(problem.reason) from None
    return EngineSettings(
        home=read.home,
        python=read.python or sys.executable,
        gpu_device=read.gpu_device,
        worker_index=read.worker_index,
        thread_count=read.thread_count,
        visible_devices=env.get(CUDA_VISIBLE_DEVICES),  # as it is: set and empty hides every GPU
        timeout_base_s=read.timeout_base_s,
        timeout_per_frame_s=read.timeout_per_frame_s,
        raw_output_limit_bytes=read.raw_output_limit_bytes,
        scratch=read.scratch,
    )


def engine_mode(env: Mapping[str, str]) -> str:
    mode = env.get(FUSIONFLEET_FACEFUSION_MODE, "").strip() or DEFAULT_MODE
    if mode not in MODES:
        raise EngineUnavailable(f"{FUSIONFLEET_FACEFUSION_MODE}={mode!r} is not one of {', '.join(MODES)}")
    return mode


def installed_package_home() -> Path | None:
    """The checkout an importable `facefusion` package comes from (the image's .pth points there)."""
    spec = importlib.util.find_spec("facefusion")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent.parent


def resolve_home(settings: EngineSettings) -> Path:
    """FaceFusion's checkout: the configured folder, else the one the `facefusion` package is in.

    Raises EngineUnavailable naming what is missing, so the worker refuses `facefusion` jobs with
    that reason instead of rendering them some other way.
    """
    home = settings.home or installed_package_home()
    if home is None:
        raise EngineUnavailable(
            f"FaceFusion is not installed on this worker: {FUSIONFLEET_FACEFUSION_HOME} is not set and no "
            "`facefusion` package is importable (it is installed in the GPU worker image at /opt/facefusion)"
        )
    script = home / "facefusion.py"
    if not script.is_file():
        raise EngineUnavailable(f"FaceFusion is not installed on this worker: {script} does not exist")
    if not (home / "facefusion" / "core.py").is_file():
        raise EngineUnavailable(
            f"FaceFusion is not installed on this worker: {home / 'facefusion'} (its package) is missing"
        )
    return home

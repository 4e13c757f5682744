"""Where FaceFusion lives and how the engine runs it, read from the environment once per worker."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gpu_worker.engines.base import EngineUnavailable

ENV_HOME = "FUSIONFLEET_FACEFUSION_HOME"
ENV_PYTHON = "FUSIONFLEET_FACEFUSION_PYTHON"
ENV_GPU_DEVICE = "FUSIONFLEET_GPU_DEVICE"
ENV_WORKER_INDEX = "FUSIONFLEET_WORKER_INDEX"
ENV_THREADS = "FUSIONFLEET_FACEFUSION_THREADS"
ENV_TIMEOUT_BASE = "FUSIONFLEET_FACEFUSION_TIMEOUT_BASE_S"
ENV_TIMEOUT_PER_FRAME = "FUSIONFLEET_FACEFUSION_TIMEOUT_PER_FRAME_S"
ENV_RAW_LIMIT = "FUSIONFLEET_FACEFUSION_RAW_OUTPUT_LIMIT_BYTES"
ENV_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"
ENV_MODE = "FUSIONFLEET_FACEFUSION_MODE"
ENV_SCRATCH = "FUSIONFLEET_SCRATCH"  # the worker's scratch folder (gpu_worker/config.py reads it too)

# warm: one FaceFusion process per engine, frames in memory (warm.py); per-segment: one
# `headless-run` per segment (engine.py), kept selectable while both exist.
MODES = ("warm", "per-segment")
DEFAULT_MODE = "warm"

# Generous for model loading and any GPU the fleet runs, but below the worker's own limit for the
# whole segment (gpu_worker/hosting/engine_host.py HostPolicy: 120 s + 2 s a frame), so a hung FaceFusion
# ends with its own last words rather than with its engine process killed.
DEFAULT_TIMEOUT_BASE_S = 75.0
DEFAULT_TIMEOUT_PER_FRAME_S = 1.8
# Up to this much uncompressed output FaceFusion writes losslessly (rawvideo); above it, x264 at
# quality 100 keeps the scratch disk in bounds (FaceFusion's final concat copies the file once).
DEFAULT_RAW_OUTPUT_LIMIT_BYTES = 4 * 1024**3


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


def _int(env: Mapping[str, str], name: str) -> int | None:
    text = env.get(name, "").strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise EngineUnavailable(f"{name}={text!r} is not a whole number") from None


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        return float(text)
    except ValueError:
        raise EngineUnavailable(f"{name}={text!r} is not a number") from None


def settings_from_env(env: Mapping[str, str]) -> EngineSettings:
    home = env.get(ENV_HOME, "").strip()
    raw_limit = _int(env, ENV_RAW_LIMIT)
    return EngineSettings(
        home=Path(home) if home else None,
        python=env.get(ENV_PYTHON, "").strip() or sys.executable,
        gpu_device=_int(env, ENV_GPU_DEVICE),
        worker_index=_int(env, ENV_WORKER_INDEX),
        thread_count=_int(env, ENV_THREADS),
        visible_devices=env.get(ENV_VISIBLE_DEVICES),
        timeout_base_s=_float(env, ENV_TIMEOUT_BASE, DEFAULT_TIMEOUT_BASE_S),
        timeout_per_frame_s=_float(env, ENV_TIMEOUT_PER_FRAME, DEFAULT_TIMEOUT_PER_FRAME_S),
        raw_output_limit_bytes=DEFAULT_RAW_OUTPUT_LIMIT_BYTES if raw_limit is None else raw_limit,
        scratch=Path(env[ENV_SCRATCH]) if env.get(ENV_SCRATCH, "").strip() else None,
    )


def engine_mode(env: Mapping[str, str]) -> str:
    mode = env.get(ENV_MODE, "").strip() or DEFAULT_MODE
    if mode not in MODES:
        raise EngineUnavailable(f"{ENV_MODE}={mode!r} is not one of {', '.join(MODES)}")
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
            f"FaceFusion is not installed on this worker: {ENV_HOME} is not set and no `facefusion` package "
            "is importable (it is installed in the GPU worker image at /opt/facefusion)"
        )
    script = home / "facefusion.py"
    if not script.is_file():
        raise EngineUnavailable(f"FaceFusion is not installed on this worker: {script} does not exist")
    if not (home / "facefusion" / "core.py").is_file():
        raise EngineUnavailable(
            f"FaceFusion is not installed on this worker: {home / 'facefusion'} (its package) is missing"
        )
    return home

"""The FaceFusion engine's environment (on the workers: the environment the worker hands down to its
engines, `WorkerEnvironment.engine_env`), read by gpu_worker/engines/facefusion/settings.py.

`CUDA_VISIBLE_DEVICES` is the table's too, but the engine reads it as it is: set and empty hides every
GPU, which this contract (an empty variable counts as unset) would read as all of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fusionfleet.environment import settings

read = settings.reader(settings.FACEFUSION)
READ_AS_IS = frozenset({settings.CUDA_VISIBLE_DEVICES})


@dataclass(frozen=True)
class FaceFusionEnvironment:
    home: Path | None = read(settings.FUSIONFLEET_FACEFUSION_HOME)  # noqa: RUF009  (None)
    python: str | None = read(settings.FUSIONFLEET_FACEFUSION_PYTHON)  # None: the worker's own
    mode: str = read(settings.FUSIONFLEET_FACEFUSION_MODE)
    gpu_device: int | None = read(settings.FUSIONFLEET_GPU_DEVICE)
    worker_index: int | None = read(settings.FUSIONFLEET_WORKER_INDEX)
    thread_count: int | None = read(settings.FUSIONFLEET_FACEFUSION_THREADS)
    timeout_base_s: float = read(settings.FUSIONFLEET_FACEFUSION_TIMEOUT_BASE_S)
    timeout_per_frame_s: float = read(settings.FUSIONFLEET_FACEFUSION_TIMEOUT_PER_FRAME_S)
    raw_output_limit_bytes: int = read(settings.FUSIONFLEET_FACEFUSION_RAW_OUTPUT_LIMIT_BYTES)
    scratch: Path | None = read(settings.FUSIONFLEET_SCRATCH)  # noqa: RUF009  (None)

"""Facts about this host that FaceFusion's execution settings depend on, and the proof that its GPU works.

Asked once per engine in `prepare()` (and at the worker's start, `startup.py`); the decisions on them
are pure functions elsewhere (execution.py, provider_proof.py).
"""

from __future__ import annotations

import glob
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from gpu_worker.engines.base import EngineUnavailable
from gpu_worker.engines.facefusion.execution import (
    PROVIDER_NAMES,
    HostFacts,
    choose_provider,
    count_devices,
    device_id,
)
from gpu_worker.engines.facefusion.process import probe_providers, query_gpu_memory_mib, run_provider_probe
from gpu_worker.engines.facefusion.provider_proof import needs_proof, proof_problem
from gpu_worker.engines.facefusion.settings import EngineSettings

logger = logging.getLogger(__name__)


def gather_facts(settings: EngineSettings, home: Path, env: Mapping[str, str]) -> HostFacts:
    """What the execution settings depend on, asked of this host once."""
    providers = probe_providers(settings.python, home, env)
    prove_provider(settings, home, env, PROVIDER_NAMES[choose_provider(providers)])
    devices = count_devices(settings.visible_devices, glob.glob("/dev/nvidia[0-9]*"))
    cpus = len(os.sched_getaffinity(0))
    memory = None
    if choose_provider(providers) != "cpu" and devices:
        device = device_id(devices, settings.worker_index, settings.gpu_device)
        visible = [entry.strip() for entry in (settings.visible_devices or "").split(",") if entry.strip()]
        # nvidia-smi numbers GPUs physically; CUDA_VISIBLE_DEVICES renumbers them for this process.
        memory = query_gpu_memory_mib(visible[device] if device < len(visible) else str(device))
    return HostFacts(providers=providers, device_count=devices, cpu_count=cpus, gpu_memory_mib=memory)


def prove_provider(settings: EngineSettings, home: Path, env: Mapping[str, str], provider: str) -> None:
    """EngineUnavailable unless a GPU provider really runs a model (no silent fall back to the CPU), on
    the device this worker will use."""
    if not needs_proof(provider):
        return
    devices = count_devices(settings.visible_devices, glob.glob("/dev/nvidia[0-9]*"))
    device = device_id(devices, settings.worker_index, settings.gpu_device)
    problem = proof_problem(run_provider_probe(settings.python, home, env, provider, device))
    if problem is not None:
        raise EngineUnavailable(f"FaceFusion cannot run on this worker's GPU: {problem}")
    logger.info("%s proven: a test model ran on it (device %s)", provider, device)

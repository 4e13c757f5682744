"""Execution settings for FaceFusion, decided by pure functions from facts about the host.

The facts (what onnxruntime offers, how many GPUs this process sees, its CPUs, the GPU's memory)
are gathered once in `prepare()`; everything here only turns them into argv fragments.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpu_worker.engines.base import EngineUnavailable

# FaceFusion 3.8.1's names for onnxruntime's providers (facefusion/choices.py,
# execution_provider_set), for the ones a FusionFleet worker can have.
PROVIDER_NAMES = {
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
    "cpu": "CPUExecutionProvider",
}
# CUDA first: TensorRT builds an engine per model on first use (minutes) and FaceFusion caches it
# under its own folder, which is read-only in the worker image.
PREFERENCE = ("cuda", "tensorrt", "cpu")

# FaceFusion's --execution-thread-count range (choices.py: create_int_range(1, 32, 1)).
MIN_THREADS, MAX_THREADS = 1, 32
# On a GPU more threads only queue on the same device; 8 is FaceFusion's own default.
GPU_THREADS = 8

# Total GPU memory (MiB) below which models are released early, and from which they are kept.
STRICT_BELOW_MIB = 8_000
TOLERANT_FROM_MIB = 20_000


@dataclass(frozen=True)
class HostFacts:
    providers: tuple[str, ...]
    device_count: int
    cpu_count: int
    gpu_memory_mib: int | None = None


def choose_provider(available: Sequence[str]) -> str:
    """FaceFusion's name for the best provider onnxruntime reports, in PREFERENCE order."""
    for name in PREFERENCE:
        if PROVIDER_NAMES[name] in available:
            return name
    raise EngineUnavailable(
        f"onnxruntime offers none of {', '.join(PROVIDER_NAMES.values())} (it reports {', '.join(available) or 'none'})"
    )


def provider_args(provider: str) -> list[str]:
    # One provider: onnxruntime itself falls back to the CPU for operators a GPU provider lacks.
    return ["--execution-providers", provider]


def count_devices(visible_devices: str | None, device_files: Sequence[str]) -> int:
    """GPUs this process can use: CUDA_VISIBLE_DEVICES when set, else the /dev/nvidiaN nodes."""
    if visible_devices is not None:
        entries = [entry.strip() for entry in visible_devices.split(",") if entry.strip()]
        # CUDA stops at the first invalid entry; "-1" and "NoDevFiles" are the usual ways to hide all.
        usable = 0
        for entry in entries:
            if entry.startswith("-") or entry.lower() == "nodevfiles":
                break
            usable += 1
        return usable
    return len(device_files)


def device_id(device_count: int, worker_index: int | None, pinned: int | None) -> int:
    """The device this worker process uses, relative to the devices it can see."""
    if pinned is not None:
        if pinned < 0 or (device_count and pinned >= device_count):
            raise EngineUnavailable(f"GPU device {pinned} was pinned but this worker sees {device_count} GPU(s)")
        return pinned
    if worker_index is not None and device_count > 1:
        # One worker process per GPU on multi-GPU hosts: spread them round-robin.
        return worker_index % device_count
    return 0


def device_args(provider: str, device: int) -> list[str]:
    if provider == "cpu":
        return []
    return ["--execution-device-ids", str(device)]


def thread_count(provider: str, cpu_count: int, device_count: int, override: int | None) -> int:
    if override is not None:
        return min(MAX_THREADS, max(MIN_THREADS, override))
    # Workers on a multi-GPU host share its CPUs, one worker per GPU.
    share = max(1, cpu_count // max(1, device_count if provider != "cpu" else 1))
    ceiling = MAX_THREADS if provider == "cpu" else GPU_THREADS
    return min(ceiling, share)


def thread_args(count: int) -> list[str]:
    return ["--execution-thread-count", str(count)]


def memory_strategy(gpu_memory_mib: int | None) -> str:
    """strict/moderate/tolerant by the GPU's total memory; moderate when it is not known.

    FaceFusion 3.8.1 reads it in each processor's post_process: strict and moderate release the
    models after a run, strict also the shared detector/recogniser models.
    """
    if gpu_memory_mib is None:
        return "moderate"
    if gpu_memory_mib < STRICT_BELOW_MIB:
        return "strict"
    if gpu_memory_mib < TOLERANT_FROM_MIB:
        return "moderate"
    return "tolerant"


def memory_args(strategy: str) -> list[str]:
    return ["--video-memory-strategy", strategy]


def execution_args(
    facts: HostFacts, worker_index: int | None, pinned: int | None, thread_override: int | None
) -> list[str]:
    """The execution and memory part of FaceFusion's argv for this worker process."""
    provider = choose_provider(facts.providers)
    device = device_id(facts.device_count, worker_index, pinned)
    threads = thread_count(provider, facts.cpu_count, facts.device_count, thread_override)
    strategy = memory_strategy(facts.gpu_memory_mib if provider != "cpu" else None)
    return [*provider_args(provider), *device_args(provider, device), *thread_args(threads), *memory_args(strategy)]

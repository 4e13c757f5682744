"""Take work only with capacity: a worker whose GPU lacks free memory leaves the queue alone.

One worker process holds one segment at a time (its one slot) and uses one GPU; on a host where
other processes share that GPU (a second worker, a leaked engine, another tenant of the card) a
worker that takes a segment without the memory to render it fails an attempt. The free memory of
the GPUs this worker may see is read with nvidia-smi before each receive; below the minimum the
worker waits and the segment stays in the queue for a worker that can render it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gpu_worker.lifecycle import nvidia_smi

QUERY = ["--query-gpu=index,uuid,memory.free", "--format=csv,noheader,nounits"]
TOTAL_QUERY = ["--query-gpu=index,uuid,memory.total", "--format=csv,noheader,nounits"]


def parse_free_mib(output: str, visible: Sequence[str]) -> float | None:
    """Least free memory (MiB) among the GPUs in `visible` (indexes or UUIDs; empty: all), or None."""
    wanted = {entry.strip() for entry in visible if entry.strip()}
    free = []
    for line in output.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) != 3:
            continue
        index, uuid, mib = fields
        if wanted and index not in wanted and uuid not in wanted:
            continue
        try:
            free.append(float(mib))
        except ValueError:
            continue
    return min(free) if free else None


def free_gpu_mib(visible: Sequence[str]) -> float | None:
    """What nvidia-smi says; None where there is none (a CPU host) or it does not answer."""
    output = nvidia_smi.query(QUERY)
    return None if output is None else parse_free_mib(output, visible)


def total_gpu_mib(visible: Sequence[str]) -> float | None:
    """The smallest total memory among this worker's GPUs (the same parse: index, uuid, MiB); None without one."""
    output = nvidia_smi.query(TOTAL_QUERY)
    return None if output is None else parse_free_mib(output, visible)


def capacity_problem(free_mib: float | None, min_free_mib: float) -> str | None:
    """Why the worker should not take a segment now, or None. Unknown memory never blocks work."""
    if free_mib is None or free_mib >= min_free_mib:
        return None
    return f"its GPU has {free_mib:.0f} MiB free, below the {min_free_mib:.0f} MiB a segment needs"


def gpu_capacity(
    min_free_mib: float, visible: Sequence[str], read: Callable[[Sequence[str]], float | None] = free_gpu_mib
) -> Callable[[], str | None]:
    """The loop's capacity check for this worker's GPUs."""
    return lambda: capacity_problem(read(visible), min_free_mib)

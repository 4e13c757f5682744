"""A worker takes a segment only when its GPU has the memory for it; otherwise the segment stays queued."""

from __future__ import annotations

import threading
import time

from gpu_worker.delivery.keeper import KeepPolicy
from gpu_worker.delivery.loop import Worker
from gpu_worker.delivery.retry import RetryPolicy
from gpu_worker.lifecycle.capacity import capacity_problem, gpu_capacity, parse_free_mib
from gpu_worker.lifecycle.stopping import StopSignal
from tests.support.fakes import FakeOrchestrator, FakeQueue
from tests.support.scripted import QUEUE, ScriptedHandler, Step

NVIDIA_SMI = """0, GPU-aaaa, 70000
1, GPU-bbbb, 1200
"""


def test_free_memory_is_read_for_the_gpus_this_worker_may_see() -> None:
    assert parse_free_mib(NVIDIA_SMI, ["0"]) == 70000
    assert parse_free_mib(NVIDIA_SMI, ["GPU-bbbb"]) == 1200
    assert parse_free_mib(NVIDIA_SMI, []) == 1200  # all of them: the tightest counts
    assert parse_free_mib("", ["0"]) is None
    assert parse_free_mib("garbage\n", []) is None


def test_unknown_memory_never_blocks_work_and_too_little_says_why() -> None:
    assert capacity_problem(None, 8000) is None  # a CPU host, or no nvidia-smi
    assert capacity_problem(9000, 8000) is None
    assert capacity_problem(1200, 8000) == "its GPU has 1200 MiB free, below the 8000 MiB a segment needs"


def test_a_worker_without_capacity_leaves_the_segment_in_the_queue_until_it_has_some() -> None:
    # GIVEN a queued segment and a worker whose GPU has 1200 MiB free of the 8000 it needs
    queue, orchestrator, handler = FakeQueue(), FakeOrchestrator(), ScriptedHandler()
    queue.create(QUEUE)
    queue.send(QUEUE, Step(task_token="t", outcome="ok").model_dump_json())
    free = {"mib": 1200.0}
    reads: list[float] = []

    def read(_visible: object) -> float:
        reads.append(free["mib"])
        return free["mib"]

    subject = Worker(
        "w", [QUEUE], handler, queue, orchestrator, RetryPolicy(max_attempts=3), KeepPolicy(60), StopSignal(),
        idle_wait_s=0, capacity=gpu_capacity(8000, ["0"], read=read),
    )  # fmt: skip
    loop = threading.Thread(target=subject.run, kwargs={"max_tasks": 1}, daemon=True)
    loop.start()
    # WHEN it has looked several times THEN it rendered nothing and the segment is still waiting, unreceived
    deadline = time.monotonic() + 5
    while len(reads) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(reads) >= 5
    assert handler.attempts == []
    assert queue.depth(QUEUE).visible == 1
    # WHEN memory frees up THEN it takes and renders the segment
    free["mib"] = 70000.0
    loop.join(timeout=10)
    assert not loop.is_alive()
    assert len(handler.attempts) == 1
    assert [call[0] for call in orchestrator.reports()] == ["success"]

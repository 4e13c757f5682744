"""The engine host with a real engine process: the parsed task crosses the pipe, the reply comes back typed."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from fusionfleet.messages import RenderTask, SegmentResult
from gpu_worker.attempt import Attempt
from gpu_worker.config import HostConfig
from gpu_worker.errors import EngineFailure
from gpu_worker.hosting.engine_host import EngineHost, HostPolicy
from gpu_worker.lifecycle import liveness
from gpu_worker.lifecycle.health import check
from gpu_worker.lifecycle.liveness import Phase
from gpu_worker.rendering.encoded_segment import RenderedFrames
from tests.support.jobs import halves, job_context

pytestmark = pytest.mark.timeout(120)


def test_a_failure_in_the_engine_process_comes_back_as_an_engine_failure(tmp_path: Path) -> None:
    # GIVEN an engine process (no AWS is reached: the engine is refused before any media is read)
    def never_finish(frames: RenderedFrames, attempt: Attempt) -> SegmentResult:
        raise AssertionError("nothing was rendered to finish")

    config = HostConfig("us-east-1", "http://127.0.0.1:9", tmp_path, "test-worker")
    host = EngineHost(config, HostPolicy(), never_finish)
    task = RenderTask(task_token="t", job=job_context(engine="no-such-engine"), segment=halves()[0])
    try:
        host.start()
        pid = host.pid
        # WHEN it is given a segment for an engine this worker does not have
        with pytest.raises(EngineFailure) as failure:
            host.render(task, Attempt(number=2), threading.Event(), threading.Event())
        # THEN the child's error arrives with its name, its reason and that a retry cannot help
        assert failure.value.name == "EngineUnavailable" and not failure.value.retryable
        assert "unknown engine 'no-such-engine'" in failure.value.reason
        # AND the engine process lives on for the next segment
        assert host.pid == pid
    finally:
        host.close()
    assert host.pid is None


def test_the_engine_process_writes_the_liveness_record_the_health_check_reads(tmp_path: Path) -> None:
    # GIVEN an engine process given a liveness record (issue 45: the health check reads the render loop)
    record = tmp_path / "alive.json"

    def never_finish(frames: RenderedFrames, attempt: Attempt) -> SegmentResult:
        raise AssertionError("nothing was rendered to finish")

    config = HostConfig("us-east-1", "http://127.0.0.1:9", tmp_path, "test-worker", liveness_file=record)
    host = EngineHost(config, HostPolicy(), never_finish)
    task = RenderTask(task_token="t", job=job_context(engine="no-such-engine"), segment=halves()[0])
    try:
        # WHEN it has started
        host.start()
        deadline = time.monotonic() + 60
        while (found := liveness.read(record)) is None or found.phase is not Phase.IDLE:
            assert time.monotonic() < deadline, found
            time.sleep(0.1)
        # THEN the record is its own (not the worker's), idle, and healthy
        assert found.pid == host.pid
        assert check({"FUSIONFLEET_LIVENESS_FILE": str(record)})[0] == 0
        # AND after a request it is idle again, written anew (the request made it busy in between)
        with pytest.raises(EngineFailure):
            host.render(task, Attempt(number=1), threading.Event(), threading.Event())
        # (the failure's reply can reach the host before the engine process has written its idle pulse: a
        # fresh-clone run on a loaded machine read RENDERING at once, so the record is awaited, briefly)
        deadline = time.monotonic() + 10
        while (after := liveness.read(record)) is None or after.phase is not Phase.IDLE or after.at <= found.at:
            assert time.monotonic() < deadline, after
            time.sleep(0.05)
    finally:
        host.close()

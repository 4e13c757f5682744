"""Frames between the warm engine and FaceFusion's process in shared memory (frame_ring.py, ring_flow.py):
the same frames as through the pipe, rings removed after each segment, the pipe where there is no room."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from gpu_worker.engines.base import EngineJob
from gpu_worker.engines.facefusion import WarmFaceFusionEngine
from gpu_worker.engines.facefusion.frame_ring import NAME_PREFIX, FrameRing, ring_slots
from gpu_worker.engines.facefusion.ring_flow import RingClosed, RingFlow
from gpu_worker.engines.facefusion.settings import EngineSettings
from tests.support import facefusion_harness as harness

SHM = Path("/dev/shm")


def test_a_frame_put_in_one_sides_ring_is_taken_whole_from_the_others() -> None:
    image = np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3)
    owner = FrameRing.create(3, image.nbytes)
    other = FrameRing.attach(owner.describe())
    try:
        owner.put(owner.slot_of(4), image)
        taken = other.take(1, image.shape)
        assert np.array_equal(taken, image)
        owner.put(1, np.zeros_like(image))
        assert np.array_equal(taken, image), "a taken frame is a copy: the slot may be written again"
        assert owner.fits((4, 6, 3)) and not owner.fits((8, 6, 3))
    finally:
        other.close()
        owner.close()
    assert str(owner.describe()["name"]).startswith(f"{NAME_PREFIX}-{os.getpid()}-")
    assert not list(SHM.glob(f"{NAME_PREFIX}-{os.getpid()}-*"))


def test_the_writer_waits_for_the_output_that_frees_its_slot_and_stops_when_the_segment_ends() -> None:
    flow = RingFlow(in_flight=1)  # 3 slots
    assert flow.slots == ring_slots(1) == 3
    assert [flow.slot_for(n) for n in range(3)] == [0, 1, 2]
    got: list[int] = []
    writer = threading.Thread(target=lambda: got.append(flow.slot_for(3)))
    writer.start()
    time.sleep(0.2)
    assert not got, "frame 3 reuses frame 0's slot: it waits until output 0 is taken"
    flow.took()
    writer.join(timeout=5)
    assert got == [0]
    failures: list[BaseException] = []

    def wait_for_slot() -> None:
        try:
            flow.slot_for(10)
        except RingClosed as error:
            failures.append(error)

    waiting = threading.Thread(target=wait_for_slot)
    waiting.start()
    flow.stop()
    waiting.join(timeout=5)
    assert failures and isinstance(failures[0], RingClosed)


def test_without_room_in_shared_memory_frames_go_through_the_pipe(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    flow = RingFlow(in_flight=5, room=32 * 1024 * 1024)
    assert flow.open(1920 * 1080 * 3) is None and not flow.active
    assert "frames go through the pipe: shared memory has 32 MB free" in caplog.text


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> harness.Harness:
    reason = harness.skip_reason()
    if reason is not None:
        pytest.skip(reason)
    return harness.prepare(tmp_path_factory.mktemp("facefusion-ring"))


def _engine(home: harness.Harness, rings: bool) -> Iterator[WarmFaceFusionEngine]:
    engine = WarmFaceFusionEngine(
        EngineSettings(home=home.home, python=home.python), harness.CPU_FACTS, env=home.env, rings=rings
    )
    engine.prepare()
    try:
        yield engine
    finally:
        engine.close()


def test_frames_through_shared_memory_equal_frames_through_the_pipe(home: harness.Harness, tmp_path: Path) -> None:
    # GIVEN a segment of 30 frames (more than the rings' slots, so every slot is reused)
    frames = harness.clip(30)
    job = EngineJob("ring", (harness.face_image(),), {"face_selector_mode": "one"}, fps=25.0, work_dir=tmp_path)
    # WHEN one warm engine renders it through the shared rings and another through the pipe
    outputs = {}
    for rings in (True, False):
        for engine in _engine(home, rings):
            outputs[rings] = list(engine.render(job, frames))
            assert engine.transport == ("shared memory" if rings else "pipe")
    # THEN both give the same frames, one per frame sent, and no shared memory is left behind
    assert len(outputs[True]) == len(frames)
    assert all(np.array_equal(a, b) for a, b in zip(outputs[True], outputs[False], strict=True))
    assert not list(SHM.glob(f"{NAME_PREFIX}-{os.getpid()}-*"))

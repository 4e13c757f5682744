"""Issue 45: the render container's health check reads a liveness record the render loop writes, not
the keeper (which keeps a hung worker's message): a hung loop fails, an idle worker and a slow but
advancing render pass (gpu_worker.lifecycle.liveness, gpu_worker.lifecycle.health)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from gpu_worker.lifecycle import liveness
from gpu_worker.lifecycle.health import check
from gpu_worker.lifecycle.liveness import Liveness, LivenessPolicy, Phase, Pulse, judge
from gpu_worker.rendering.render import busy
from tests.support.fakes import Clock

POLICY = LivenessPolicy(stall_s=600, start_s=900, analysis_s=3600)
T0 = 1_000_000.0


# ---------------------------------------------------------------------- the rule (pure)
def test_a_render_whose_engine_gives_no_frame_for_longer_than_the_stall_allowance_is_hung() -> None:
    stuck = Pulse(Phase.RENDERING, at=T0, pid=7)
    assert judge(stuck, T0 + 599, POLICY).healthy
    verdict = judge(stuck, T0 + 601, POLICY)
    assert not verdict.healthy and "hung" in verdict.why and "601 s" in verdict.why


def test_an_idle_worker_is_healthy_however_long_it_waits_for_work() -> None:
    assert judge(Pulse(Phase.IDLE, at=T0), T0 + 7 * 24 * 3600, POLICY).healthy


def test_a_slow_render_that_still_advances_passes_each_check(tmp_path: Path) -> None:
    # GIVEN a render whose engine gives a frame every 90 s (far slower than any real one)
    clock = Clock(T0)
    record = tmp_path / "alive.json"
    alive = Liveness(record, clock=clock)
    alive.rendering()
    # WHEN the check runs every 30 s for an hour
    for second in range(30, 3600, 30):
        clock.advance(30)
        if second % 90 == 0:
            alive.advanced(second // 90)
        # THEN it passes every time
        assert judge(liveness.read(record), clock(), POLICY).healthy, second
    # AND once the frames stop, it fails after the stall allowance
    clock.advance(POLICY.stall_s + 1)
    assert not judge(liveness.read(record), clock(), POLICY).healthy


def test_an_engine_load_may_take_its_allowance_and_no_more_and_a_missing_record_fails() -> None:
    starting = Pulse(Phase.STARTING, at=T0)
    assert judge(starting, T0 + 899, POLICY).healthy
    assert not judge(starting, T0 + 901, POLICY).healthy
    assert not judge(None, T0, POLICY).healthy
    # AND an analysis has its own allowance, or the one its record names
    assert judge(Pulse(Phase.ANALYSING, at=T0), T0 + 3000, POLICY).healthy
    assert not judge(Pulse(Phase.ANALYSING, at=T0, allow_s=60), T0 + 61, POLICY).healthy


def test_a_record_cut_short_or_of_another_shape_reads_as_none() -> None:
    assert liveness.parse('{"phase": "rendering", "at": 5') is None
    assert liveness.parse('{"phase": "sleeping", "at": 5}') is None
    assert liveness.parse("[]") is None
    assert liveness.parse('{"phase": "idle", "at": 5, "pid": 3}') == Pulse(Phase.IDLE, 5.0, 3)


# ---------------------------------------------------------------------- the writer and the render loop
def test_frames_renew_the_record_at_most_once_a_second_and_only_while_rendering(tmp_path: Path) -> None:
    clock = Clock(T0)
    record = tmp_path / "alive.json"
    alive = Liveness(record, every_s=1.0, clock=clock)
    alive.starting()
    clock.advance(10)
    alive.advanced(1)  # a frame before any render (a prefetch's decoder): not a sign of the render loop
    assert liveness.read(record) == Pulse(Phase.STARTING, T0, alive_pid(record))
    with busy(alive):
        assert liveness.read(record) == Pulse(Phase.RENDERING, T0 + 10, alive_pid(record))
        clock.advance(0.5)
        alive.advanced(2)
        assert liveness.read(record).at == T0 + 10  # type: ignore[union-attr]
        clock.advance(0.6)
        alive.advanced(3)
        assert liveness.read(record).at == T0 + 11.1  # type: ignore[union-attr]
    # AND the request's end leaves it idle, whatever its outcome
    assert liveness.read(record).phase is Phase.IDLE  # type: ignore[union-attr]
    try:
        with busy(alive, analysing=True):
            assert liveness.read(record).phase is Phase.ANALYSING  # type: ignore[union-attr]
            raise RuntimeError("the analysis failed")
    except RuntimeError:
        pass
    assert liveness.read(record).phase is Phase.IDLE  # type: ignore[union-attr]


def alive_pid(record: Path) -> int:
    found = liveness.read(record)
    assert found is not None
    return found.pid


def test_a_frame_checked_while_rendering_never_writes_after_the_loop_went_idle(tmp_path: Path) -> None:
    # GIVEN a render whose encoder thread reports a frame just as the loop goes idle: the loop's idle() is let
    # in between the frame's check and its write (found by a make test run: the record ended "rendering")
    went_idle = threading.Event()
    reads: list[float] = []

    def go_idle() -> None:
        alive.idle()
        went_idle.set()

    def clock() -> float:
        reads.append(time.time())
        if threading.current_thread().name == "encoder" and len(reads) == 2:
            threading.Thread(target=go_idle).start()
            went_idle.wait(0.5)  # the idle write goes first wherever the frame's check does not hold it off
        return 100.0 + len(reads)

    alive = Liveness(tmp_path / "alive.json", every_s=0.0, clock=clock)
    alive.rendering()
    # WHEN the frame comes out of the engine on the encoder's thread
    frame = threading.Thread(target=alive.advanced, name="encoder")
    frame.start()
    frame.join()
    assert went_idle.wait(5)
    # THEN the record ends idle: an idle worker never reads as a render that stopped giving frames
    found = liveness.read(tmp_path / "alive.json")
    assert found is not None and found.phase is Phase.IDLE


def test_a_record_that_cannot_be_written_never_fails_the_render(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    alive = Liveness(blocked / "alive.json")  # its folder is a file
    alive.rendering()
    alive.advanced(1)
    alive.idle()


# ---------------------------------------------------------------------- the command
def test_the_health_command_exits_by_the_record(tmp_path: Path) -> None:
    record = tmp_path / "alive.json"
    env = {"FUSIONFLEET_LIVENESS_FILE": str(record)}
    assert check(env)[0] == 1  # nothing written yet
    alive = Liveness(record, clock=lambda: T0)
    alive.rendering()
    assert check(env, clock=lambda: T0 + 60) == (0, "healthy: rendering, last frame out of the engine 60 s ago "
                                                    "(allowed 600 s)")  # fmt: skip
    status, line = check(env, clock=lambda: T0 + 3600)
    assert status == 1 and line.startswith("unhealthy: rendering, last frame out of the engine 3600 s ago")
    assert check({})[0] == 1
    # AND as the container runs it: its own process, exit status 0 for an idle worker
    alive.idle()
    ran = subprocess.run([sys.executable, "-m", "gpu_worker.lifecycle.health"], env=env, capture_output=True,
                         text=True, timeout=60, check=False)  # fmt: skip
    assert (ran.returncode, ran.stdout.split(":")[0]) == (0, "healthy"), ran.stderr

"""The worker's end of the engine process's pipe (gpu_worker/hosting/channel.py) and the engine process's
word that a segment's encoder finished (engine_child.settle), over a real pipe."""

from __future__ import annotations

import multiprocessing
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from fusionfleet.messages import RenderTask
from gpu_worker.errors import EngineFailure
from gpu_worker.hosting.channel import EngineChannel
from gpu_worker.hosting.engine_child import Checkpointed, Encoded, settle
from gpu_worker.hosting.engine_host import EngineHost
from gpu_worker.rendering.encoded_segment import RenderedFrames
from tests.support.jobs import halves, job_context


def _frames(workdir: Path) -> RenderedFrames:
    task = RenderTask(task_token="t", job=job_context(), segment=halves()[0])
    return RenderedFrames(task, workdir, ((0, 50),), -1, 50, 2.0, 0.0, 1.0, 0, stages=(("engine", 2.0),))


def test_an_encoders_end_reaches_its_waiter_past_the_replies_in_between() -> None:
    # GIVEN the worker's end of a pipe
    ours, theirs = multiprocessing.Pipe()
    channel = EngineChannel(ours)
    # WHEN the engine process answers the next segment, then says the earlier one's encoder finished
    theirs.send(Checkpointed(40))
    theirs.send(Encoded("/scratch/a", (("encode", 3.0),)))
    # THEN the waiter for that segment gets its word, and the render waiting for a reply gets its own
    assert channel.encoded("/scratch/a", 5) == Encoded("/scratch/a", (("encode", 3.0),))
    assert channel.reply(5) == Checkpointed(40)
    # AND a segment the engine process never spoke of is waited for only until the given time
    assert channel.encoded("/scratch/b", 0.1) is None and channel.open
    theirs.close()


def test_a_waiter_learns_at_once_that_the_engine_process_ended() -> None:
    # GIVEN a finish waiting for a segment's encoder
    ours, theirs = multiprocessing.Pipe()
    channel = EngineChannel(ours)
    heard: list[Encoded | None] = []
    waiter = threading.Thread(target=lambda: heard.append(channel.encoded("/scratch/a", 60)))
    waiter.start()
    # WHEN the engine process's end closes (it died) before it said anything
    theirs.close()
    waiter.join(10)
    # THEN the waiter stops waiting with nothing, and the channel says it is closed
    assert not waiter.is_alive() and heard == [None]
    assert not channel.open


def test_the_finish_gets_the_frames_with_the_encoders_stages(tmp_path: Path) -> None:
    # GIVEN a segment answered early, whose encoder has since finished
    ours, theirs = multiprocessing.Pipe()
    channel = EngineChannel(ours)
    frames = _frames(tmp_path)
    theirs.send(Encoded(str(tmp_path), (("engine", 2.0), ("tail", 0.5))))
    # WHEN its finish asks for it
    got = EngineHost._encoded(channel, frames, 5, "segment 0")
    # THEN it gets the same frames with the render's complete stages
    assert got.stages == (("engine", 2.0), ("tail", 0.5)) and got.workdir == tmp_path


def test_the_finish_fails_retryably_when_the_engine_process_ends_first(tmp_path: Path) -> None:
    # GIVEN a segment answered early and its work folder on disk
    ours, theirs = multiprocessing.Pipe()
    channel = EngineChannel(ours)
    work = tmp_path / "segment"
    work.mkdir()
    # WHEN the engine process dies before its encoder finished
    theirs.close()
    with pytest.raises(EngineFailure, match="ended before its chunks were all encoded") as failure:
        EngineHost._encoded(channel, _frames(work), 5, "segment 0")
    # THEN the attempt fails with why, a retry can help, and the half-made work folder is gone
    assert failure.value.name == "EngineCrashed" and failure.value.retryable
    assert not work.exists()


@dataclass
class _Done:
    frames: RenderedFrames
    error: Exception | None = None
    settled: list[bool] = field(default_factory=list)

    def settle(self) -> RenderedFrames:
        self.settled.append(True)
        if self.error is not None:
            raise self.error
        return replace(self.frames, stages=(("tail", 0.25),))


def test_the_engine_process_says_how_each_encoder_ended(tmp_path: Path) -> None:
    # GIVEN two segments answered early: one whose encoder finishes, one whose encoder fails
    said: list[Encoded] = []
    frames = _frames(tmp_path)
    # WHEN the engine process waits for each
    settle(_Done(frames), said.append)  # type: ignore[arg-type]
    settle(_Done(frames, OSError("disk full")), said.append)  # type: ignore[arg-type]
    # THEN it says so for each, with the stages or the failure's reason
    assert said[0] == Encoded(str(tmp_path), (("tail", 0.25),))
    failure = said[1].failure
    assert failure is not None and "disk full" in failure.reason and said[1].stages == ()

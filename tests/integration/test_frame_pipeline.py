"""The pipelined segment (gpu_worker/rendering/frames.py): the same bytes as frames sent one by one, the engine
waiting only for its first frame, and every way out (a failure in any stage, a drain, a cancel)
leaving no stage running and no finished chunk unsaved. Runs the real decoder and ffmpeg."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from fractions import Fraction
from pathlib import Path

import pytest

from fusionfleet.errors import MediaError
from fusionfleet.jobs.encoding import EncoderSettings, encoder_settings
from fusionfleet.media.decode import iter_frames
from fusionfleet.media.ffmpeg import encode_segment_argv
from fusionfleet.media.limits import MediaLimits
from fusionfleet.media.probe import VideoInfo, probe_video
from fusionfleet.media.ranges import FileRangeSource, RangeReader
from fusionfleet.media.runner import FramePipe
from gpu_worker.engines.base import EngineJob, Frame, Image
from gpu_worker.engines.copy import CopyEngine
from gpu_worker.errors import Cancelled, Drained
from gpu_worker.rendering.frames import chunk_grid, start_range
from tests.support.media import remux, write_video

pytestmark = pytest.mark.timeout(300)
STAGE_THREADS = ("decode-ahead", "encode", "upload")


class SleepEngine(CopyEngine):
    """The copy engine (frames out = frames in) with `seconds` a frame of waiting and no CPU (a GPU's share of a
    frame), failing at frame `fail_at`."""

    name = "sleep"

    def __init__(self, seconds: float, fail_at: int | None = None) -> None:
        self.seconds = seconds
        self.fail_at = fail_at

    def render(self, job: EngineJob, frames: Iterable[Frame]) -> Iterator[Image]:
        for frame in frames:
            if frame.index == self.fail_at:
                raise RuntimeError(f"engine failed at frame {frame.index}")
            time.sleep(self.seconds)
            yield frame.image


@pytest.fixture(scope="module")
def moving(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """8 s of 640×360 at 25 fps with a stamp in every frame."""
    folder = tmp_path_factory.mktemp("pipeline")
    return write_video(folder / "moving.mp4", seconds=8, fps=25, width=640, height=360, with_stamp=True)


def _video(path: Path) -> VideoInfo:
    return probe_video(RangeReader(FileRangeSource(path), "t"), "t", MediaLimits())


def _settings(video: VideoInfo, chunk: int = 50) -> EncoderSettings:
    width, height = video.display_size
    return encoder_settings(width, height, video.fps, {}, chunk)


def _render(
    path: Path, engine: object, chunks: list[tuple[int, int]], workdir: Path, **kwargs: object
) -> tuple[object, list[tuple[int, int]]]:
    video = _video(path)
    saved: list[tuple[int, int]] = []

    def on_chunk(chunk: Path, first: int, end: int) -> None:
        assert chunk.is_file() and chunk.stat().st_size > 0
        saved.append((first, end))

    workdir.mkdir(exist_ok=True)
    stats = start_range(
        engine, EngineJob("job", ()), RangeReader(FileRangeSource(path), "t"), video, chunks,  # type: ignore[arg-type]
        _settings(video), workdir, kwargs.pop("cancel", threading.Event()), "segment", on_chunk=on_chunk,  # type: ignore[arg-type]
        **kwargs,  # type: ignore[arg-type]
    ).settle()  # fmt: skip
    return stats, saved


def _no_stage_left() -> bool:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if not [t for t in threading.enumerate() if t.name in STAGE_THREADS]:
            return True
        time.sleep(0.05)
    return False


def test_the_pipeline_writes_the_same_bytes_as_frames_sent_one_by_one(moving: Path, tmp_path: Path) -> None:
    # GIVEN frames 60-160 of a clip, cut into 50-frame chunks (the first two chunks, and a lead-in before them)
    video = _video(moving)
    settings = _settings(video)
    chunks = chunk_grid(60, 160, settings.chunk_frames)
    # WHEN the pipeline renders them with the copy engine
    _render(moving, CopyEngine(), chunks, tmp_path / "pipelined")
    # AND the same frames are encoded one by one, each chunk through its own ffmpeg with the job's argv
    decoded = dict(iter_frames(RangeReader(FileRangeSource(moving), "t"), video, 60, 160))
    (tmp_path / "by-hand").mkdir()
    width, height = video.display_size
    for first, end in chunks:
        out = tmp_path / "by-hand" / f"{first:07d}-{end:07d}.mp4"
        with FramePipe(encode_segment_argv(width, height, settings, out), "by hand", timeout_s=60) as pipe:
            for index in range(first, end):
                pipe.write(decoded[index])
    # THEN every chunk is byte-identical
    for first, end in chunks:
        name = f"{first:07d}-{end:07d}.mp4"
        assert (tmp_path / "pipelined" / name).read_bytes() == (tmp_path / "by-hand" / name).read_bytes(), name


def test_the_engine_waits_only_for_its_first_frame(moving: Path, tmp_path: Path) -> None:
    # GIVEN an engine that spends 20 ms a frame and no CPU, on 150 frames (an engine floor of 3 s)
    chunks = chunk_grid(0, 150, 50)
    # WHEN the pipeline renders them
    stats, saved = _render(moving, SleepEngine(0.02), chunks, tmp_path)
    # THEN every chunk is saved and the engine's own time holds all of its sleep (its waits are not in it)
    assert saved == chunks
    stages = stats.stages  # type: ignore[attr-defined]
    wall, engine = stats.wall_s, stats.engine_s  # type: ignore[attr-defined]
    assert engine >= 150 * 0.02, stages
    # AND the decoder kept ahead of it: the engine waited for its first frame and hardly for any other
    assert stages["engine_waits_input"] < 0.5, stages
    # AND decode and encode ran beside the engine, not between its frames: the wall time is the engine's
    # time and its waits, well short of the three one after another
    waits = stages["first_frame"] + stages["engine_waits_input"] + stages["engine_waits_output"] + stages["tail"]
    assert wall <= engine + waits + 0.5, stages
    assert wall < engine + stages["decode"] + stages["encode"], stages
    assert _no_stage_left()


def test_an_engine_failure_saves_the_chunks_it_finished_and_raises_its_own_error(moving: Path, tmp_path: Path) -> None:
    # GIVEN an engine that fails when it reaches frame 70, after finishing the chunk 0-50
    chunks = chunk_grid(0, 150, 50)
    saved: list[tuple[int, int]] = []

    def on_chunk(chunk: Path, first: int, end: int) -> None:
        saved.append((first, end))

    video = _video(moving)
    # WHEN the pipeline renders
    with pytest.raises(RuntimeError, match="engine failed at frame 70"):
        start_range(
            SleepEngine(0.0, fail_at=70), EngineJob("job", ()), RangeReader(FileRangeSource(moving), "t"), video,
            chunks, _settings(video), tmp_path, threading.Event(), "segment", on_chunk=on_chunk,
        ).settle()  # fmt: skip
    # THEN the finished chunk was still saved (a later attempt resumes after it), the unfinished one not,
    # and no stage is left running
    assert saved == [(0, 50)]
    assert _no_stage_left()


def test_a_damaged_target_fails_with_the_decoders_reason_and_stops_every_stage(tmp_path: Path) -> None:
    # GIVEN a clip cut off half-way through its bytes
    plain = write_video(tmp_path / "plain.mp4", seconds=4, fps=25, width=320, height=240, audio=False)
    whole = remux(plain, tmp_path / "whole.mp4", "-movflags", "+faststart")  # its index first, so it still probes
    video = _video(whole)
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    # WHEN the pipeline renders all of it
    with pytest.raises(MediaError):
        start_range(
            CopyEngine(), EngineJob("job", ()), RangeReader(FileRangeSource(cut), "t"), video, chunk_grid(0, 100, 50),
            _settings(video), tmp_path, threading.Event(), "segment",
        ).settle()  # fmt: skip
    # THEN no stage is left running
    assert _no_stage_left()


def test_an_encoder_that_dies_fails_the_render_with_ffmpegs_reason(moving: Path, tmp_path: Path) -> None:
    # GIVEN encoder settings that ffmpeg refuses (a preset x264 does not know)
    video = _video(moving)
    settings = encoder_settings(*video.display_size, Fraction(25), {}, 50)
    broken = EncoderSettings(**{**settings.to_dict(), "preset": "no-such-preset"})
    # WHEN the pipeline renders
    with pytest.raises(MediaError, match="ffmpeg"):
        start_range(
            CopyEngine(), EngineJob("job", ()), RangeReader(FileRangeSource(moving), "t"), video,
            chunk_grid(0, 100, 50), broken, tmp_path, threading.Event(), "segment",
        ).settle()  # fmt: skip
    # THEN no stage is left running
    assert _no_stage_left()


def test_a_drain_stops_after_the_chunk_in_hand_with_that_chunk_saved(moving: Path, tmp_path: Path) -> None:
    # GIVEN a stop requested before the render starts (SIGTERM: stop after the current chunk)
    drain = threading.Event()
    drain.set()
    # WHEN the pipeline renders three chunks
    with pytest.raises(Drained) as stopped:
        _render(moving, SleepEngine(0.005), chunk_grid(0, 150, 50), tmp_path, drain=drain)
    # THEN it stopped after the first chunk, which was saved before the drain was raised
    assert stopped.value.next_frame == 50
    assert sorted(path.name for path in tmp_path.glob("*.mp4")) == ["0000000-0000050.mp4"]
    assert _no_stage_left()


def test_a_cancel_stops_every_stage_without_saving_what_follows(moving: Path, tmp_path: Path) -> None:
    # GIVEN a job cancelled while its segment renders
    cancel = threading.Event()
    timer = threading.Timer(0.3, cancel.set)
    timer.start()
    # WHEN the pipeline renders a long range with a slow engine
    with pytest.raises(Cancelled):
        _render(moving, SleepEngine(0.02), chunk_grid(0, 200, 50), tmp_path, cancel=cancel)
    timer.join()
    # THEN it stopped within the first chunk and nothing is left running
    assert not list(tmp_path.glob("0000050-*.mp4"))
    assert _no_stage_left()


def test_the_engine_is_free_before_the_encoder_has_saved_the_last_chunks(moving: Path, tmp_path: Path) -> None:
    # GIVEN a range of two chunks whose first chunk's save is held until the test lets it go
    video = _video(moving)
    chunks = chunk_grid(0, 100, 50)
    let_go = threading.Event()
    saved: list[tuple[int, int]] = []

    def on_chunk(chunk: Path, first: int, end: int) -> None:
        let_go.wait(60)
        saved.append((first, end))

    # WHEN the pipeline renders them
    pending = start_range(
        CopyEngine(), EngineJob("job", ()), RangeReader(FileRangeSource(moving), "t"), video, chunks,
        _settings(video), tmp_path, threading.Event(), "segment", on_chunk=on_chunk,
    )  # fmt: skip
    # THEN it hands the range back with the engine done and no chunk saved yet: the engine can take the
    # next segment while the encoder finishes this one
    assert saved == [] and pending.engine_s > 0
    # AND settling waits for the encoder: every chunk saved, the tail timed, no stage left running
    let_go.set()
    stats = pending.settle()
    assert saved == chunks and stats.frames == 100
    assert stats.stages["tail"] > 0, stats.stages
    assert _no_stage_left()

"""The warm FaceFusion engine's own parts, without FaceFusion: its wire format, argv and choices.

The engine against FaceFusion's real code is tested in test_facefusion_harness.py (needs a checkout).
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import pytest

from gpu_worker.engines.base import EngineError, EngineJob, EngineUnavailable, Frame
from gpu_worker.engines.facefusion import warm_server
from gpu_worker.engines.facefusion.execution import HostFacts
from gpu_worker.engines.facefusion.settings import EngineSettings
from gpu_worker.engines.facefusion.warm import (
    WarmFaceFusionEngine,
    _segment_paths,
    check_key,
    segment_argv,
    warm_execution_args,
    with_reference,
)

GPU_HOST = HostFacts(providers=("CUDAExecutionProvider", "CPUExecutionProvider"), device_count=2, cpu_count=16)


def _frames(count: int, lead_in: int = 0) -> list[Frame]:
    return [
        Frame(index=10 + offset, image=np.full((4, 6, 3), offset, np.uint8), emit=offset >= lead_in)
        for offset in range(count)
    ]


def test_messages_and_frames_cross_the_pipe_unchanged() -> None:
    # GIVEN a header and a frame written in the wire format
    image = np.random.default_rng(1).integers(0, 255, (5, 7, 3), dtype=np.uint8)
    stream = io.BytesIO()
    warm_server.write_message(stream, {"op": "frame", "shape": [5, 7]}, warm_server.frame_bytes(image))
    warm_server.write_message(stream, {"op": "end"})
    stream.seek(0)
    # WHEN read back THEN the same header and the same pixels come out, then the next message
    header, payload = warm_server.read_message(stream)
    assert header["op"] == "frame" and header["bytes"] == image.nbytes
    assert np.array_equal(warm_server.frame_from(header, payload), image)
    assert warm_server.read_message(stream) == ({"op": "end"}, b"")
    # AND a pipe closed mid-message is an EOFError, not a short frame
    with pytest.raises(EOFError):
        warm_server.read_message(io.BytesIO(stream.getvalue()[:9]))


def test_warm_engine_keeps_models_loaded_but_keeps_gpu_pinning() -> None:
    # GIVEN a 2-GPU host and worker 3 WHEN the warm engine's execution flags are chosen
    args = warm_execution_args(GPU_HOST, EngineSettings(home=None, python=sys.executable, worker_index=3))
    # THEN it runs on CUDA, on the GPU the worker index picks, with the strategy that keeps sessions
    assert args == [
        "--execution-providers", "cuda", "--execution-device-ids", "1", "--execution-thread-count", "8",
        "--video-memory-strategy", "tolerant",
    ]  # fmt: skip


def test_segment_argv_is_headless_runs_with_the_reference_frame_as_target(tmp_path: Path) -> None:
    # GIVEN a segment's paths and a job's options
    paths = _segment_paths(tmp_path, 2)
    options = {"face_selector_mode": "many", "output_video_quality": 90, "face_swapper_weight": 0.8}
    execution = ["--execution-providers", "cpu"]
    # WHEN the argv is built
    argv = segment_argv(paths, options, execution)
    # THEN it is FaceFusion's headless-run argv: the reference image as target, the job's options,
    # not the ones the worker's encoder owns
    assert argv[0] == "headless-run"
    assert argv[argv.index("--target-path") + 1] == str(tmp_path / "reference.png")
    assert argv[argv.index("--source-paths") + 1 : argv.index("--source-paths") + 3] == [
        str(tmp_path / "source-0.png"),
        str(tmp_path / "source-1.png"),
    ]
    assert "--face-selector-mode" in argv and "--face-swapper-weight" in argv
    assert "--output-video-quality" not in argv
    # AND the pre-checks' key holds the options and execution, not the paths
    key = check_key(options, execution)
    assert str(tmp_path) not in " ".join(key) and "--face-swapper-weight" in key
    # AND the same job gives the same argv on its next segment (FaceFusion parses it once)
    assert segment_argv(_segment_paths(tmp_path, 2), options, execution) == argv


def _job(reference: np.ndarray | None = None) -> EngineJob:
    return EngineJob(job_id="j", sources=(np.zeros((4, 4, 3), np.uint8),), reference=reference)


def test_the_reference_is_the_jobs_decided_one_and_no_frame_waits() -> None:
    # GIVEN a segment of 6 frames, 2 of them lead-in, of a job whose reference was decided once
    # (the reference frame the slicer decoded from the whole video)
    frames = _frames(6, lead_in=2)
    decided = np.full((4, 6, 3), 200, np.uint8)
    # WHEN FaceFusion's reference picture is chosen
    reference, rest = with_reference(_job(decided), iter(frames))
    # THEN it is the job's, and every frame still streams, none held back (a segment without the
    # job's reference frame once buffered whole in memory)
    assert reference is decided
    assert [frame.index for frame in rest] == [10, 11, 12, 13, 14, 15]


def test_without_a_decided_reference_any_picture_serves_the_first_frame() -> None:
    # GIVEN a job with no reference (its mode takes none) WHEN chosen THEN the first frame, nothing held
    frames = _frames(3)
    reference, rest = with_reference(_job(), iter(frames))
    assert reference is not None and np.array_equal(reference, frames[0].image)
    assert [frame.index for frame in rest] == [10, 11, 12]


def test_no_frames_no_reference() -> None:
    reference, _ = with_reference(_job(), iter([]))
    assert reference is None


def test_warm_engine_needs_curl_but_not_ffmpeg(tmp_path: Path) -> None:
    # GIVEN a FaceFusion folder and a PATH without curl
    home = tmp_path / "facefusion"
    (home / "facefusion").mkdir(parents=True)
    (home / "facefusion.py").write_text("")
    (home / "facefusion" / "core.py").write_text("")
    engine = WarmFaceFusionEngine(
        EngineSettings(home=home, python=sys.executable), GPU_HOST, env={"PATH": str(tmp_path / "empty")}
    )
    # WHEN prepared THEN it is unavailable, naming curl (FaceFusion runs it to list its models)
    with pytest.raises(EngineUnavailable, match="curl is not on PATH"):
        engine.prepare()


def test_warm_engine_refuses_what_facefusion_cannot_take(tmp_path: Path) -> None:
    # GIVEN a job FaceFusion could not render (lip_syncer needs audio, which validation refuses at submit)
    engine = WarmFaceFusionEngine(EngineSettings(home=None, python=sys.executable), GPU_HOST, env={})
    job = EngineJob(job_id="j", sources=(np.zeros((4, 4, 3), np.uint8),), options={"processors": ["lip_syncer"]})
    # WHEN it reaches the worker anyway THEN the engine refuses it with validation's reason
    with pytest.raises(EngineError, match="lip_syncer needs an audio file among the sources"):
        engine.validate(job)


def test_scratch_comes_from_the_workers_setting(tmp_path: Path) -> None:
    # GIVEN the worker's scratch folder in the environment WHEN the settings are read THEN the engine uses it
    from gpu_worker.engines.facefusion.settings import settings_from_env

    assert settings_from_env({"FUSIONFLEET_SCRATCH": str(tmp_path)}).scratch == tmp_path
    assert settings_from_env({}).scratch is None

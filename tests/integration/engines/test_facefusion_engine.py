"""The FaceFusion engine: its argv, its execution choices, and how it treats FaceFusion's results.

FaceFusion itself is not installed here, so a small fake `facefusion.py` stands in for it: it takes
the same `headless-run` flags and either renders (copies or negates the trimmed target with ffmpeg,
as FaceFusion writes a rawvideo MOV) or fails the ways FaceFusion 3.8.1 fails.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest

from fleetctl import samples
from fusionfleet.environment.settings import FUSIONFLEET_FACEFUSION_MODE
from fusionfleet.errors import InputRejected
from fusionfleet.facefusion.options import to_cli_args
from gpu_worker.engines.base import Engine, EngineError, EngineJob, EngineUnavailable, Frame, Image
from gpu_worker.engines.facefusion import FaceFusionEngine, WarmFaceFusionEngine, failures, settings
from gpu_worker.engines.facefusion.argv import headless_run_argv, output_args, run_paths, trim_args
from gpu_worker.engines.facefusion.execution import (
    HostFacts,
    choose_provider,
    count_devices,
    device_args,
    device_id,
    execution_args,
    memory_strategy,
    provider_args,
    thread_count,
)
from gpu_worker.engines.facefusion.job_options import check_options, option_args, reference_position
from gpu_worker.engines.facefusion.process import STOP_GRACE_S
from gpu_worker.engines.facefusion.settings import EngineSettings
from gpu_worker.engines.registry import create_engine, engine_names

CUDA, TENSORRT, CPU = "CUDAExecutionProvider", "TensorrtExecutionProvider", "CPUExecutionProvider"

FAKE_FACEFUSION = r"""
import json, os, subprocess, sys, time
import imageio_ffmpeg

def value(flag):
    return sys.argv[sys.argv.index(flag) + 1]

mode = os.environ.get("FAKE_MODE", "copy")
dump = os.environ.get("FAKE_DUMP")
if dump:
    with open(dump, "w") as handle:
        json.dump({"argv": sys.argv[1:], "cwd": os.getcwd()}, handle)
assert sys.argv[1] == "headless-run", sys.argv
target, output = value("--target-path"), value("--output-path")
start, end = int(value("--trim-frame-start")), int(value("--trim-frame-end"))
print("[FACEFUSION.CORE] processing step 1 of 1", file=sys.stderr, flush=True)
if mode == "hang":
    time.sleep(3600)
if mode == "nsfw":
    sys.stderr.write("analysing:   0%|          | 0/8 [00:00<?, ?frame/s]\r")
    sys.stderr.write("analysing: 100%|==========| 8/8 [00:00<00:00, 90.00frame/s, rate=62.5]\n")
    sys.exit(1)
if mode == "fail":
    print("[FACEFUSION.CORE] no source face detected!", file=sys.stderr)
    sys.exit(1)
if mode == "no_output":
    print("[FACEFUSION.CORE] merging video failed", file=sys.stderr)
    sys.exit(0)
last = end - (2 if mode == "short" else 0)
filters = f"trim=start_frame={start}:end_frame={last},setpts=PTS-STARTPTS" + (",negate" if mode == "negate" else "")
# What FaceFusion's writer does (ffmpeg.create_video_writer) with the encoder it was given.
filters += ",scale=out_color_matrix=bt709:out_range=tv,setparams=colorspace=bt709:color_primaries=bt709:color_trc=bt709"
if value("--output-video-encoder") == "libx264":
    codec = ["-c:v", "libx264", "-crf", "0", "-preset", value("--output-video-preset"), "-pix_fmt", "yuv420p"]
else:
    codec = ["-c:v", "rawvideo", "-pix_fmt", "rgb24"]
subprocess.run(
    [imageio_ffmpeg.get_ffmpeg_exe(), "-loglevel", "error", "-y", "-i", target, "-vf", filters, *codec, "-f", "mov",
     output],
    check=True,
)
sys.stderr.write("processing: 100%|==========| 8/8 [00:00<00:00, 9.00frame/s]\n")
print("[FACEFUSION.TO_VIDEO] processing to video succeeded in 0.1 seconds", file=sys.stderr)
"""

FAKE_ONNXRUNTIME = "def get_available_providers():\n    return ['CPUExecutionProvider']\n"


# --- helpers --------------------------------------------------------------------------------------


def _fake_home(root: Path, onnxruntime: str = FAKE_ONNXRUNTIME) -> Path:
    home = root / "facefusion-home"
    (home / "facefusion").mkdir(parents=True)
    (home / "facefusion" / "__init__.py").write_text("")
    (home / "facefusion" / "core.py").write_text("")
    (home / "facefusion.py").write_text(FAKE_FACEFUSION)
    # The engine asks FaceFusion's interpreter from FaceFusion's folder: this one shadows any other.
    (home / "onnxruntime").mkdir()
    (home / "onnxruntime" / "__init__.py").write_text(onnxruntime)
    return home


def _tool_dir(root: Path, tools: tuple[str, ...] = ("curl", "ffmpeg", "ffprobe")) -> Path:
    """Stand-ins for what FaceFusion's pre-check looks for on PATH (the fake calls ffmpeg itself)."""
    folder = root / "bin"
    folder.mkdir(exist_ok=True)
    for tool in tools:
        script = folder / tool
        script.write_text("#!/bin/sh\nexit 0\n")
        script.chmod(0o755)
    return folder


def _env(root: Path, mode: str = "copy", **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "CUDA_VISIBLE_DEVICES"}
    env.update(
        FUSIONFLEET_FACEFUSION_HOME=str(_fake_home(root)),
        PATH=str(_tool_dir(root)),
        FAKE_MODE=mode,
        FAKE_DUMP=str(root / "argv.json"),
        **extra,
    )
    return env


def _frames(count: int, lead_in: int = 0, width: int = 160, height: int = 96, first: int = 40) -> list[Frame]:
    images = samples.astronaut_frames(count, width, height)
    return [Frame(first + number, image, emit=number >= lead_in) for number, image in enumerate(images)]


def _job(root: Path, options: dict[str, object] | None = None, reference: Image | None = None) -> EngineJob:
    return EngineJob(
        job_id="job-1",
        sources=(samples.grace_hopper(),),
        options=MappingProxyType(options or {}),
        reference=reference,
        fps=30000 / 1001,
        work_dir=root / "work",
    )


def _dumped(root: Path) -> dict[str, object]:
    result: dict[str, object] = json.loads((root / "argv.json").read_text())
    return result


def _flag(argv: list[str], flag: str, count: int = 1) -> list[str]:
    start = argv.index(flag) + 1
    return argv[start : start + count]


def _prepared(root: Path, mode: str = "copy", **extra: str) -> FaceFusionEngine:
    engine = FaceFusionEngine(env=_env(root, mode, **extra))
    engine.prepare()
    return engine


# --- argv: pure, by list equality ---------------------------------------------------------------


def test_full_headless_run_argv_for_a_realistic_job() -> None:
    # GIVEN a two-face job on a 4-GPU host (worker 1), 12 lead-in frames and 100 of its own
    folder = Path("/scratch/job/facefusion-x")
    options = {
        "face_swapper_model": "hyperswap_1a_256",
        "face_selector_mode": "one",
        "face_mask_types": ["box", "occlusion"],
        "face_swapper_pixel_boost": "512x512",
        "output_video_quality": 80,
    }
    facts = HostFacts(providers=(CUDA, CPU), device_count=4, cpu_count=32, gpu_memory_mib=23_028)
    execution = execution_args(facts, worker_index=1, pinned=None, thread_override=None)
    # WHEN the argv is built
    argv = headless_run_argv(
        "/opt/venv/bin/python", Path("/opt/facefusion"), run_paths(folder, 2), options, (0, 112), 12,
        (1920, 1080), 4 * 1024**3, execution,
    )  # fmt: skip
    # THEN it is exactly FaceFusion 3.8.1's headless-run command for it
    assert argv == [
        "/opt/venv/bin/python", "/opt/facefusion/facefusion.py", "headless-run",
        "--config-path", f"{folder}/facefusion.ini", "--temp-path", f"{folder}/temp", "--jobs-path", f"{folder}/jobs",
        "--source-paths", f"{folder}/source-0.png", f"{folder}/source-1.png",
        "--target-path", f"{folder}/target.mov", "--output-path", f"{folder}/output.mov",
        "--trim-frame-start", "0", "--trim-frame-end", "112",
        "--reference-frame-number", "12",
        "--face-selector-mode", "one", "--face-mask-types", "box", "occlusion",
        "--processors", "face_swapper", "--face-swapper-model", "hyperswap_1a_256",
        "--face-swapper-pixel-boost", "512x512",
        "--output-video-encoder", "rawvideo", "--output-audio-volume", "0",
        "--execution-providers", "cuda", "--execution-device-ids", "1", "--execution-thread-count", "8",
        "--video-memory-strategy", "tolerant",
        "--log-level", "info",
    ]  # fmt: skip


def test_trim_end_is_exclusive_as_in_facefusion_3_8_1() -> None:
    # GIVEN FaceFusion 3.8.1 renders range(trim_frame_start, trim_frame_end)
    # (facefusion/workflows/to_video.py, process_memory_frames: `temp_frame_range = range(...)`)
    # WHEN 8 frames are asked for, from the start and after a reference frame put in front
    # THEN the end is one past the last frame
    assert trim_args(0, 8) == ["--trim-frame-start", "0", "--trim-frame-end", "8"]
    assert trim_args(1, 8) == ["--trim-frame-start", "1", "--trim-frame-end", "9"]


@pytest.mark.parametrize(
    ("available", "expected"),
    [([CUDA, CPU], "cuda"), ([TENSORRT, CUDA, CPU], "cuda"), ([TENSORRT, CPU], "tensorrt"), ([CPU], "cpu")],
)
def test_provider_choice_prefers_cuda_then_tensorrt_then_cpu(available: list[str], expected: str) -> None:
    # GIVEN what onnxruntime reports WHEN the provider is chosen THEN it is the preferred one
    assert provider_args(choose_provider(available)) == ["--execution-providers", expected]


def test_no_usable_provider_is_unavailable() -> None:
    # GIVEN onnxruntime offers only a provider FusionFleet does not run
    # WHEN a provider is chosen THEN the engine is unavailable, naming what onnxruntime offers
    with pytest.raises(EngineUnavailable, match="DmlExecutionProvider"):
        choose_provider(["DmlExecutionProvider"])


def test_device_pinning() -> None:
    # GIVEN hosts with one or four GPUs, with and without a pinned device
    # WHEN the device is chosen THEN workers spread round-robin, a pin wins, the CPU gets no device
    assert device_args("cuda", device_id(4, worker_index=5, pinned=None)) == ["--execution-device-ids", "1"]
    assert device_args("cuda", device_id(4, worker_index=5, pinned=2)) == ["--execution-device-ids", "2"]
    assert device_args("cuda", device_id(1, worker_index=3, pinned=None)) == ["--execution-device-ids", "0"]
    assert device_args("cuda", device_id(4, worker_index=None, pinned=None)) == ["--execution-device-ids", "0"]
    assert device_args("cpu", device_id(0, worker_index=3, pinned=None)) == []
    with pytest.raises(EngineUnavailable, match="pinned but this worker sees 2"):
        device_id(2, worker_index=None, pinned=2)


def test_device_count_follows_cuda_visible_devices() -> None:
    # GIVEN CUDA_VISIBLE_DEVICES set in various ways, or unset with device nodes present
    # WHEN the devices are counted THEN it is what CUDA would let this process use
    nodes = ["/dev/nvidia0", "/dev/nvidia1"]
    assert [count_devices(visible, nodes) for visible in ("2,3", "1", "", "-1", "0,-1,1", None)] == [2, 1, 0, 0, 1, 2]


def test_thread_count() -> None:
    # GIVEN various hosts WHEN the thread count is chosen
    # THEN a GPU worker takes its share of CPUs up to 8, a CPU one up to 32, an override is clamped
    assert thread_count("cuda", cpu_count=32, device_count=4, override=None) == 8
    assert thread_count("cuda", cpu_count=16, device_count=4, override=None) == 4
    assert thread_count("cpu", cpu_count=64, device_count=0, override=None) == 32
    assert thread_count("cpu", cpu_count=1, device_count=0, override=None) == 1
    assert thread_count("cuda", cpu_count=8, device_count=1, override=48) == 32
    assert thread_count("cuda", cpu_count=8, device_count=1, override=0) == 1


def test_memory_strategy() -> None:
    # GIVEN GPUs of 6, 16 and 80 GB and one whose memory could not be read
    # WHEN the strategy is chosen THEN small GPUs release models, big ones keep them
    assert [memory_strategy(mib) for mib in (6_144, 16_384, 81_920, None)] == [
        "strict",
        "moderate",
        "tolerant",
        "moderate",
    ]


def test_execution_args_on_a_cpu_host() -> None:
    # GIVEN a host without GPU WHEN the execution part is built THEN CPU, no device, moderate memory
    facts = HostFacts(providers=(CPU,), device_count=0, cpu_count=6, gpu_memory_mib=None)
    assert execution_args(facts, worker_index=None, pinned=None, thread_override=None) == [
        "--execution-providers", "cpu", "--execution-thread-count", "6", "--video-memory-strategy", "moderate",
    ]  # fmt: skip


def test_output_is_lossless_rawvideo_until_the_disk_limit() -> None:
    # GIVEN a 1080p segment small enough and one too big for the raw output limit
    # WHEN the output settings are chosen THEN rawvideo, else x264 at quality 100 (crf 0)
    limit = 1920 * 1080 * 3 * 100
    assert output_args(1920, 1080, 100, limit) == ["--output-video-encoder", "rawvideo", "--output-audio-volume", "0"]
    assert output_args(1920, 1080, 101, limit) == [
        "--output-video-encoder", "libx264", "--output-video-quality", "100", "--output-video-preset", "ultrafast",
        "--output-audio-volume", "0",
    ]  # fmt: skip


def test_options_map_one_to_one_except_those_the_worker_owns() -> None:
    # GIVEN options FaceFusion takes as they are, and output settings the worker's encoder applies
    passed = {"face_detector_score": 0.35, "face_selector_order": "left-right", "face_enhancer_blend": 60}
    owned = {"output_video_quality": 90, "output_video_preset": "slow", "reference_frame_number": 7}
    # WHEN the job's part of the argv is built
    argv = option_args({**passed, **owned, "processors": ["face_swapper", "face_enhancer"]})
    # THEN it is to_cli_args of what FaceFusion gets, the owned ones left to the worker
    assert argv == to_cli_args({**passed, "processors": ["face_swapper", "face_enhancer"]})
    assert argv == [
        "--face-detector-score", "0.35", "--face-selector-order", "left-right",
        "--processors", "face_swapper", "face_enhancer", "--face-enhancer-blend", "60",
    ]  # fmt: skip


def test_default_processor_is_face_swapper() -> None:
    # GIVEN no processors option WHEN the job's argv is built THEN FaceFusion's default is spelled out
    assert option_args({}) == ["--processors", "face_swapper"]


def test_reference_frame_is_translated_into_the_segment() -> None:
    # GIVEN a segment of frames 40..47, the first two lead-in
    indices, emits = list(range(40, 48)), [False, False, *[True] * 6]
    # WHEN the reference frame is placed THEN the job's frame where the segment has it,
    # else the segment's first frame of its own
    assert reference_position({"reference_frame_number": 45}, indices, emits) == 5
    assert reference_position({"reference_frame_number": 3}, indices, emits) == 2
    assert reference_position({}, indices, emits) == 2


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"face_swapper_modle": "inswapper_128"}, "did you mean 'face_swapper_model'"),
        ({"execution_providers": ["cpu"]}, "execution_providers is set by the worker"),
        ({"temp_path": "/tmp"}, "temp_path is set by the worker"),
        ({"face_swapper_weight": 2.0}, "face_swapper_weight"),
        ({"processors": ["face_swapper", "lip_syncer"]}, "lip_syncer needs an audio file among the sources"),
        ({"temp_frame_format": "jpeg", "workflow_strategy": "disk"}, "'jpeg' with the disk workflow"),
    ],
)
def test_refused_options(tmp_path: Path, options: dict[str, object], message: str) -> None:
    # GIVEN a job with an option FaceFusion would not take (or would fail on quietly)
    engine = FaceFusionEngine(env=_env(tmp_path))
    # WHEN it is validated THEN it is refused with a clear reason
    with pytest.raises(EngineError, match=message):
        engine.validate(_job(tmp_path, options))


def test_job_without_source_is_refused(tmp_path: Path) -> None:
    # GIVEN a face swap without a source face WHEN it is checked THEN it is refused
    job = EngineJob(job_id="j", sources=(), work_dir=tmp_path)
    with pytest.raises(EngineError, match="face_swapper needs a face image among the sources"):
        check_options(job)


# --- canned FaceFusion output -----------------------------------------------------------------------


def test_content_analyser_refusal_is_read_from_its_progress_bar() -> None:
    # GIVEN FaceFusion's console when its analyser flags the target (exit 1, no message)
    log = (
        "[FACEFUSION.CORE] processing step 1 of 1\n"
        "analysing:   0%|          | 0/30 [00:00<?, ?frame/s]\r"
        "analysing: 100%|==========| 30/30 [00:02<00:00, 14.2frame/s, rate=23.3]\n"
    )
    # WHEN the reason is read THEN it names the analyser and the rate
    reason = failures.failure_reason(1, log)
    assert reason.startswith("FaceFusion's content analyser refused the target: it flagged 23.3 %")
    # and a run that analysed below the limit and went on is not called a refusal
    passed = log.replace("rate=23.3", "rate=0") + "processing: 100%|==========| 30/30 [00:09<00:00]\n"
    assert failures.analyser_refused(passed) is None


def test_meaningful_lines_leave_progress_bars_out() -> None:
    # GIVEN a log with progress bars between messages
    log = "a\nprocessing:  50%|=====     | 1/2 [00:01<00:01]\r\n\n[FACEFUSION.CORE] merging video failed\n"
    # WHEN its last words are taken THEN only the messages remain
    assert failures.last_words(log) == "a | [FACEFUSION.CORE] merging video failed"
    assert failures.failure_reason(2, "").startswith("FaceFusion refused to start (exit code 2)")


# --- the engine against the fake FaceFusion ---------------------------------------------------------


def test_render_yields_exactly_the_frames_given(tmp_path: Path) -> None:
    # GIVEN a fake FaceFusion that copies its trimmed target, and 3 lead-in + 5 segment frames
    engine = _prepared(tmp_path, "copy")
    frames = _frames(8, lead_in=3)
    # WHEN the segment is rendered
    images = list(engine.render(_job(tmp_path, {"face_selector_mode": "many"}), frames))
    # THEN one image per frame comes back, in order, bit for bit (lossless both ways)
    assert len(images) == len(frames)
    assert sum(frame.emit for frame in frames) == 5
    for frame, image in zip(frames, images, strict=True):
        assert image.shape == frame.image.shape
        assert np.array_equal(image, frame.image)
    # and FaceFusion ran in its own folder with the segment's trim, sources and options
    dumped = _dumped(tmp_path)
    argv = dumped["argv"]
    assert isinstance(argv, list)
    assert dumped["cwd"] == str(tmp_path / "facefusion-home")
    assert _flag(argv, "--trim-frame-start") == ["0"]
    assert _flag(argv, "--trim-frame-end") == ["8"]
    assert _flag(argv, "--reference-frame-number") == ["3"]
    assert _flag(argv, "--face-selector-mode") == ["many"]
    assert _flag(argv, "--processors") == ["face_swapper"]
    assert _flag(argv, "--execution-providers") == ["cpu"]
    # and its files are gone afterwards
    assert list((tmp_path / "work").iterdir()) == []


def test_render_yields_facefusions_output_not_its_input(tmp_path: Path) -> None:
    # GIVEN a fake FaceFusion that negates every frame
    engine = _prepared(tmp_path, "negate")
    frames = _frames(4)
    # WHEN rendered THEN the images are FaceFusion's
    images = list(engine.render(_job(tmp_path), frames))
    assert [np.array_equal(image, 255 - frame.image) for frame, image in zip(frames, images, strict=True)] == [True] * 4


def test_x264_output_above_the_raw_limit_comes_back_close(tmp_path: Path) -> None:
    # GIVEN a raw output limit of 0 bytes, so FaceFusion writes x264 at quality 100 (yuv420p)
    engine = _prepared(tmp_path, "copy", FUSIONFLEET_FACEFUSION_RAW_OUTPUT_LIMIT_BYTES="0")
    frames = _frames(4, lead_in=1)
    # WHEN rendered
    images = list(engine.render(_job(tmp_path), frames))
    # THEN FaceFusion was asked for x264, and every frame came back, close to what went in
    argv = _dumped(tmp_path)["argv"]
    assert isinstance(argv, list)
    assert _flag(argv, "--output-video-encoder", 5) == [
        "libx264", "--output-video-quality", "100", "--output-video-preset", "ultrafast"
    ]  # fmt: skip
    assert [image.shape for image in images] == [frame.image.shape for frame in frames]
    errors = [
        float(np.abs(image.astype(int) - frame.image.astype(int)).mean())
        for frame, image in zip(frames, images, strict=True)
    ]
    assert max(errors) < 4.0, errors


def test_odd_sized_frames_come_back_at_their_size(tmp_path: Path) -> None:
    # GIVEN 161×97 frames (FaceFusion makes every size even) WHEN rendered
    engine = _prepared(tmp_path, "copy")
    frames = _frames(3, width=161, height=97)
    images = list(engine.render(_job(tmp_path), frames))
    # THEN they come back unchanged, the padding cropped off again
    assert [np.array_equal(image, frame.image) for frame, image in zip(frames, images, strict=True)] == [True] * 3


def test_reference_image_goes_in_front_and_is_trimmed_off(tmp_path: Path) -> None:
    # GIVEN a job with a reference face image
    engine = _prepared(tmp_path, "copy")
    frames = _frames(5, lead_in=2)
    # WHEN rendered
    images = list(engine.render(_job(tmp_path, reference=samples.grace_hopper()), frames))
    # THEN FaceFusion takes the reference from frame 0 and renders frames [1, 6): the segment
    argv = _dumped(tmp_path)["argv"]
    assert isinstance(argv, list)
    assert _flag(argv, "--reference-frame-number") == ["0"]
    assert _flag(argv, "--trim-frame-start") == ["1"]
    assert _flag(argv, "--trim-frame-end") == ["6"]
    assert [np.array_equal(image, frame.image) for frame, image in zip(frames, images, strict=True)] == [True] * 5


def test_short_output_fails_before_any_frame(tmp_path: Path) -> None:
    # GIVEN a fake FaceFusion that drops the last two frames and exits 0
    engine = _prepared(tmp_path, "short")
    handed_on: list[Image] = []
    # WHEN rendered THEN it fails with the count, and not a single frame was handed on
    with pytest.raises(EngineError, match="has 6 frames for the 8 it was given"):
        handed_on.extend(engine.render(_job(tmp_path), _frames(8)))
    assert handed_on == []


def test_exit_zero_without_output_fails(tmp_path: Path) -> None:
    # GIVEN a fake FaceFusion that exits 0 without writing its output
    engine = _prepared(tmp_path, "no_output")
    # WHEN rendered THEN it fails with FaceFusion's last words
    with pytest.raises(EngineError, match=r"code 0 but wrote no output video: .*merging video failed"):
        list(engine.render(_job(tmp_path), _frames(3)))


def test_content_analyser_refusal_fails_with_its_reason(tmp_path: Path) -> None:
    # GIVEN a fake FaceFusion whose content analyser flags the target
    engine = _prepared(tmp_path, "nsfw")
    # WHEN rendered THEN the refusal is the reason
    with pytest.raises(EngineError, match=r"content analyser refused the target: it flagged 62\.5 %"):
        list(engine.render(_job(tmp_path), _frames(3)))


def test_failure_carries_facefusions_message(tmp_path: Path) -> None:
    # GIVEN a fake FaceFusion that finds no face in the source
    engine = _prepared(tmp_path, "fail")
    # WHEN rendered THEN its message is the reason, told as a refusal of the job's inputs (not retried)
    with pytest.raises(InputRejected, match=r"refused the job's inputs: .*no source face detected!"):
        list(engine.render(_job(tmp_path), _frames(3)))


def test_hung_facefusion_is_stopped(tmp_path: Path) -> None:
    # GIVEN a fake FaceFusion that hangs, a 1 s budget, and SIGTERM ignored as the worker's engine
    # process ignores it (FaceFusion would inherit that and shrug off being stopped)
    engine = _prepared(
        tmp_path, "hang", FUSIONFLEET_FACEFUSION_TIMEOUT_BASE_S="1", FUSIONFLEET_FACEFUSION_TIMEOUT_PER_FRAME_S="0"
    )
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    started = time.monotonic()
    # WHEN rendered THEN it is stopped at once (no kill -9 grace needed) and reported
    try:
        with pytest.raises(EngineError, match=r"did not finish 3 frames within 1 s and was stopped: .*step 1 of 1"):
            list(engine.render(_job(tmp_path), _frames(3)))
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert time.monotonic() - started < STOP_GRACE_S


def test_facefusion_timeout_fires_before_the_engine_hosts() -> None:
    # GIVEN the default settings and the worker's limit for a whole segment
    from gpu_worker.hosting.engine_host import HostPolicy

    defaults = EngineSettings(home=None, python="python")
    # WHEN a segment (plus its 12 lead-in frames) runs THEN FaceFusion's own limit comes first,
    # so the user gets FaceFusion's last words rather than a killed engine process
    assert defaults.timeout_s(100) == pytest.approx(75 + 100 * 1.8)
    for frames in (1, 100, 150, 600, 5000):
        assert defaults.timeout_s(frames + 12) < HostPolicy().timeout_s(frames)


def test_refused_options_never_reach_facefusion(tmp_path: Path) -> None:
    # GIVEN a prepared engine and a job with an unknown option
    engine = _prepared(tmp_path, "copy")
    # WHEN rendered THEN it is refused before FaceFusion runs
    with pytest.raises(EngineError, match="unknown option"):
        list(engine.render(_job(tmp_path, {"not_an_option": 1}), _frames(2)))
    assert not (tmp_path / "argv.json").exists()


# --- prepare ----------------------------------------------------------------------------------------


def test_prepare_without_facefusion_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN no FaceFusion home configured and no `facefusion` package
    monkeypatch.setattr(settings, "installed_package_home", lambda: None)
    env = {"PATH": str(_tool_dir(tmp_path))}
    # WHEN prepared THEN the engine is unavailable, naming the setting
    with pytest.raises(EngineUnavailable, match="not installed on this worker: FUSIONFLEET_FACEFUSION_HOME is not set"):
        FaceFusionEngine(env=env).prepare()


def test_prepare_with_an_empty_home(tmp_path: Path) -> None:
    # GIVEN a home folder without FaceFusion in it
    env = {"FUSIONFLEET_FACEFUSION_HOME": str(tmp_path), "PATH": str(_tool_dir(tmp_path))}
    # WHEN prepared THEN the engine is unavailable, naming the missing script
    with pytest.raises(EngineUnavailable, match=f"not installed on this worker: {tmp_path}/facefusion.py does not"):
        FaceFusionEngine(env=env).prepare()


def test_prepare_without_onnxruntime(tmp_path: Path) -> None:
    # GIVEN FaceFusion's files but an onnxruntime that does not import
    broken = "raise ModuleNotFoundError(\"No module named 'onnxruntime'\")\n"
    env = {
        **os.environ,
        "FUSIONFLEET_FACEFUSION_HOME": str(_fake_home(tmp_path, onnxruntime=broken)),
        "FUSIONFLEET_FACEFUSION_PYTHON": sys.executable,
        "PATH": str(_tool_dir(tmp_path)),
    }
    # WHEN prepared THEN the engine is unavailable, naming onnxruntime
    with pytest.raises(EngineUnavailable, match="onnxruntime cannot be imported"):
        FaceFusionEngine(env=env).prepare()


def test_prepare_without_ffmpeg_on_path(tmp_path: Path) -> None:
    # GIVEN FaceFusion installed but only curl on PATH
    env = {"FUSIONFLEET_FACEFUSION_HOME": str(_fake_home(tmp_path)), "PATH": str(_tool_dir(tmp_path, ("curl",)))}
    # WHEN prepared THEN the engine is unavailable, naming what FaceFusion's pre-check needs
    with pytest.raises(EngineUnavailable, match="ffmpeg, ffprobe not on PATH"):
        FaceFusionEngine(env=env).prepare()


def test_registry_offers_facefusion_next_to_the_others() -> None:
    # GIVEN the registry WHEN asked for facefusion THEN it builds the warm engine, and keeps the others
    env = {key: value for key, value in os.environ.items() if key != FUSIONFLEET_FACEFUSION_MODE}
    engine = create_engine("facefusion", env)
    assert isinstance(engine, WarmFaceFusionEngine) and isinstance(engine, Engine)
    assert {"copy", "classic", "facefusion"} <= set(engine_names())


def test_per_segment_engine_stays_selectable() -> None:
    # GIVEN the mode set to per-segment WHEN the registry builds facefusion THEN it is headless-run's
    assert isinstance(create_engine("facefusion", {FUSIONFLEET_FACEFUSION_MODE: "per-segment"}), FaceFusionEngine)
    # AND an unknown mode is refused with the choices
    with pytest.raises(EngineUnavailable, match="warm, per-segment"):
        create_engine("facefusion", {FUSIONFLEET_FACEFUSION_MODE: "lukewarm"})


# --- the real FaceFusion, where it is installed -----------------------------------------------------


def _real_home() -> Path | None:
    configured = os.environ.get("FUSIONFLEET_FACEFUSION_HOME")
    if configured and (Path(configured) / "facefusion.py").is_file():
        return Path(configured)
    return None


@pytest.mark.slow
@pytest.mark.skipif(_real_home() is None, reason="FaceFusion is not installed (it runs in the GPU worker image)")
def test_real_facefusion_swaps_the_face(tmp_path: Path) -> None:
    # GIVEN the real FaceFusion and 6 frames of the astronaut, the first 2 lead-in
    engine = FaceFusionEngine(env=os.environ)
    engine.prepare()
    frames = _frames(6, lead_in=2, width=640, height=360)
    # WHEN Grace Hopper's face is swapped in
    images = list(engine.render(_job(tmp_path, {"face_selector_mode": "one"}), frames))
    engine.close()
    # THEN every frame comes back at its size, and changed where the face is
    assert [image.shape for image in images] == [frame.image.shape for frame in frames]
    pairs = zip(frames, images, strict=True)
    changed = [float(np.abs(image.astype(int) - frame.image.astype(int)).mean()) for frame, image in pairs]
    assert min(changed) > 0.5, changed

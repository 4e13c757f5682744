"""Both FaceFusion engines against FaceFusion 3.8.1's own code, with stand-in models on the CPU.

Needs FaceFusion's source (../shared/third_party/facefusion-3.8.1 beside the clone, as CI has it, or
FUSIONFLEET_FACEFUSION_SOURCE) and its environment (`make facefusion-env`, which `make test` builds);
skipped with the reason otherwise. The stand-in swapper inverts the face region (and tints it by the
source's identity), so a swapped frame is recognisable: about 255 - input in the face's middle, the
input elsewhere.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Generator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fleetctl.harness.geometry import SOURCE_TINT
from fleetctl.harness.pictures import face_image, scene_frame
from fusionfleet.errors import InputRejected
from gpu_worker.delivery.retry import retryable
from gpu_worker.engines.base import Engine, EngineError, EngineJob, Frame, Image
from gpu_worker.engines.facefusion import FaceFusionEngine, WarmFaceFusionEngine
from gpu_worker.engines.facefusion.settings import EngineSettings
from tests.support import facefusion_harness as harness

pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("facefusion_harness"),  # skipped where the harness is missing, failed in CI
]

# The stand-in swappers tint the inverted face by the source's identity: SOURCE_TINT (RGB, 0..1) for a source
# of person "b", its negative for person "a" (the recogniser's embedding is ± one direction). What a swap
# from the harness's source (person a) adds to each channel, BGR, in levels; a swap from the wrong source
# adds the opposite (8 to 20 levels away), which the check below refuses.
SOURCE_A_TINT = -np.asarray(SOURCE_TINT[::-1]) * 255
SWAP_TOLERANCE = 2.0  # levels: the warp back and the 8-bit rounding, not another source


def _settings(home: harness.Harness) -> EngineSettings:
    return EngineSettings(home=home.home, python=home.python)


@pytest.fixture
def per_segment(home: harness.Harness) -> Generator[FaceFusionEngine]:
    """The per-segment engine on the harness's folder, on the CPU, prepared; closed after the test."""
    engine = FaceFusionEngine(_settings(home), harness.CPU_FACTS, env=home.env)
    engine.prepare()
    yield engine
    engine.close()


def _job(tmp_path: Path, options: Mapping[str, Any] | None = None, source: Image | None = None) -> EngineJob:
    return EngineJob(
        job_id="harness",
        sources=(harness.face_image() if source is None else source,),
        options=dict(options or {"face_selector_mode": "one"}),
        fps=25.0,
        work_dir=tmp_path / "work",
    )


def _swapped(frame: Frame, image: Image) -> tuple[float, float]:
    """(distance of the face's middle from 255 - input tinted by the source's identity, distance of the rest
    from the input)."""
    ys, xs = harness.face_core()
    expected = (255 - frame.image[ys, xs].astype(float)) + SOURCE_A_TINT
    inverted = float(np.abs(image[ys, xs].astype(float) - expected).mean())
    kept = float(np.abs(harness.outside_face(image).astype(int) - harness.outside_face(frame.image).astype(int)).mean())
    return inverted, kept


def _assert_swapped(frames: list[Frame], images: list[Image]) -> None:
    """Every emitted frame swapped (the lead-in ones the worker drops: the warm engine leaves them as they are)."""
    assert len(images) == len(frames)
    for frame, image in zip(frames, images, strict=True):
        if not frame.emit:
            continue
        assert image.shape == frame.image.shape
        inverted, kept = _swapped(frame, image)
        assert inverted < SWAP_TOLERANCE and kept < 1.0, (frame.index, inverted, kept)


def test_stand_in_models_are_where_facefusion_looks_with_their_hashes(home: harness.Harness) -> None:
    # GIVEN the harness WHEN it prepared FaceFusion's folder THEN every model has the CRC-32 FaceFusion checks
    import zlib

    for name in home.models:
        model = home.models_dir / name
        assert model.with_suffix(".hash").read_text() == format(zlib.crc32(model.read_bytes()), "08x")
    assert {"hyperswap_1a_256.onnx", "inswapper_128.onnx", "yoloface_8n.onnx"} <= set(home.models)


def test_inswapper_runs_through_its_embedding_conversion_in_both_engines(
    warm: WarmFaceFusionEngine, tmp_path: Path, per_segment: FaceFusionEngine
) -> None:
    # GIVEN the other swapper family: inswapper_128 (128² crops, the source embedding multiplied by
    # the 512×512 matrix FaceFusion reads from the model), stand-ins with the real shapes
    options = {"face_selector_mode": "one", "face_swapper_model": "inswapper_128"}
    frames = harness.clip(3, start=40)
    # WHEN both engines render with it
    old = list(per_segment.render(_job(tmp_path, options), frames))
    new = list(warm.render(_job(tmp_path, options), frames))
    # THEN both swapped every face, alike, and the warm one loaded that swapper
    _assert_swapped(frames, old)
    _assert_swapped(frames, new)
    assert max(int(np.abs(a.astype(int) - b.astype(int)).max()) for a, b in zip(old, new, strict=True)) <= 1
    assert "inswapper_128.onnx" in warm.stats.session_models


def test_a_swap_from_the_wrong_source_fails_the_swap_check(warm: WarmFaceFusionEngine, tmp_path: Path) -> None:
    # GIVEN the harness's frames and, as the source, a picture of the other person (b)
    frames = harness.clip(2, start=10)
    wrong = face_image(person="b")
    # WHEN the warm engine swaps with it
    images = list(warm.render(_job(tmp_path, source=wrong), frames))
    # THEN every face is inverted but tinted the other way: the check made for person a's source refuses it
    for frame, image in zip(frames, images, strict=True):
        inverted, _ = _swapped(frame, image)
        assert inverted > 3 * SWAP_TOLERANCE, (frame.index, inverted)


def test_per_segment_headless_run_swaps_every_frame(tmp_path: Path, per_segment: FaceFusionEngine) -> None:
    # GIVEN the per-segment engine on FaceFusion's own code and 6 frames, the first 2 lead-in
    frames = [Frame(frame.index, frame.image, emit=frame.index >= 2) for frame in harness.clip(6)]
    # WHEN they are rendered
    images = list(per_segment.render(_job(tmp_path), frames))
    # THEN FaceFusion swapped the face in every one of them, in order, and left the rest alone
    _assert_swapped(frames, images)


def test_warm_engine_gives_the_frames_headless_run_gives(
    warm: WarmFaceFusionEngine, tmp_path: Path, per_segment: FaceFusionEngine
) -> None:
    # GIVEN the same segment through both engines
    frames = harness.clip(8, start=30)
    old = list(per_segment.render(_job(tmp_path), frames))
    # WHEN the warm engine renders it
    new = list(warm.render(_job(tmp_path), frames))
    # THEN the frames are the same (the old path's lossless video round trip changes nothing)
    _assert_swapped(frames, new)
    assert len(new) == len(old)
    for before, after in zip(old, new, strict=True):
        assert int(np.abs(before.astype(int) - after.astype(int)).max()) <= 1


def test_reference_mode_picks_the_same_face_in_both_engines(
    warm: WarmFaceFusionEngine, tmp_path: Path, per_segment: FaceFusionEngine
) -> None:
    # GIVEN FaceFusion's default selector (reference: the face like the one in the reference frame)
    # and a segment with 2 lead-in frames, whose first emitted frame is the reference
    frames = [Frame(frame.index, frame.image, emit=frame.index >= 22) for frame in harness.clip(6, start=20)]
    options = {"face_selector_mode": "reference", "reference_face_distance": 0.3}
    # WHEN both engines render it
    old = list(per_segment.render(_job(tmp_path, options), frames))
    new = list(warm.render(_job(tmp_path, options), frames))
    # THEN both swapped the face in every frame, alike
    _assert_swapped(frames, old)
    _assert_swapped(frames, new)
    emitted = [(a, b) for frame, a, b in zip(frames, old, new, strict=True) if frame.emit]
    assert max(int(np.abs(a.astype(int) - b.astype(int)).max()) for a, b in emitted) <= 1
    # AND the warm engine left the lead-in frames to FaceFusion as context, unprocessed
    assert all(np.array_equal(frame.image, b) for frame, b in zip(frames, new, strict=True) if not frame.emit)


def _blinking(count: int, hidden: int) -> list[Frame]:
    """The harness's face in every frame but `hidden`, where only the background is."""
    frames = harness.clip(count)
    empty = scene_frame(*harness.SIZE, hidden, [])
    return [Frame(frame.index, empty if frame.index == hidden else frame.image, frame.emit) for frame in frames]


@pytest.mark.parametrize(("amount", "filled"), [(2, True), (0, False)])
def test_the_tracker_fills_a_missing_face_from_the_frames_after_it_seen_as_lead_out(
    warm: WarmFaceFusionEngine, tmp_path: Path, amount: int, filled: bool
) -> None:
    # GIVEN the face tracker on, a face missing from frame 3, and a segment ending at frame 4 whose
    # lead-out (the frames after it that the tracker looks at) the worker feeds as frames not emitted
    options = {"face_selector_mode": "one", "face_tracker_score": 0.3, "target_frame_amount": amount}
    job = _job(tmp_path, options)
    lead_out = warm.lead_out_frames(job)
    frames = [Frame(frame.index, frame.image, emit=frame.index < 4) for frame in _blinking(4 + lead_out, hidden=3)]
    # WHEN the warm engine renders it
    images = list(warm.render(job, frames))
    # THEN the engine asked for target_frame_amount frames of lead-out (0 kept as 0, not FaceFusion's default)
    assert lead_out == amount
    # AND frame 3's face was filled in from the frames around it only where the tracker looks ahead,
    # as FaceFusion's own run fills it (the frames after it are in the video)
    ys, xs = harness.face_core()
    changed = float(np.abs(images[3][ys, xs].astype(int) - frames[3].image[ys, xs].astype(int)).mean())
    assert (changed > 50) is filled, changed
    _assert_swapped(frames[:3], images[:3])


def test_a_scaled_output_is_rendered_at_its_size_and_an_enhanced_frame_comes_back_larger(
    warm: WarmFaceFusionEngine, tmp_path: Path
) -> None:
    # GIVEN half the size asked for WHEN rendered THEN FaceFusion's processors worked on the frame
    # already scaled (vision.scale_resolution), as its own run does: half-size frames come back
    half = list(warm.render(_job(tmp_path, {"face_selector_mode": "one", "output_video_scale": 0.5}), harness.clip(2)))
    assert {image.shape for image in half} == {(120, 160, 3)}
    # AND the frame enhancer's frames come back four times larger, for the encoder to scale
    enhanced = list(warm.render(_job(tmp_path, {"processors": ["frame_enhancer"]}), harness.clip(2)))
    assert {image.shape for image in enhanced} == {(960, 1280, 3)}


def test_warm_second_segment_loads_no_model(warm: WarmFaceFusionEngine, tmp_path: Path) -> None:
    # GIVEN a warm engine that rendered one segment of a job
    job = _job(tmp_path)
    list(warm.render(job, harness.clip(4)))
    loaded = warm.stats.session_loads_total
    # WHEN it renders the next two segments
    for start in (4, 8):
        frames = harness.clip(4, start=start)
        images = list(warm.render(job, frames))
        _assert_swapped(frames, images)
        # THEN no inference session was created for them, nor FaceFusion's pre-checks run again
        assert warm.stats.session_loads == 0 and warm.stats.session_models == ()
        assert not warm.stats.pre_checked
    assert warm.stats.session_loads_total == loaded > 0


def test_other_options_load_only_their_models(warm: WarmFaceFusionEngine, tmp_path: Path) -> None:
    # GIVEN a warm engine that rendered with the default face mask
    list(warm.render(_job(tmp_path), harness.clip(2)))
    # WHEN a job asks for the occlusion mask too (its options go through FaceFusion's parser)
    options = {"face_selector_mode": "one", "face_mask_types": ["box", "occlusion"], "face_swapper_weight": 0.7}
    frames = harness.clip(3)
    images = list(warm.render(_job(tmp_path, options), frames))
    # THEN it renders (the stand-in occluder keeps the whole face), loading just FaceFusion's face
    # masker pool, which holds the occluder and the parser together
    _assert_swapped(frames, images)
    assert warm.stats.pre_checked
    assert sorted(warm.stats.session_models) == ["bisenet_resnet_34.onnx", "xseg_1.onnx"]
    assert warm.stats.session_loads == 2
    # AND back on the first options nothing loads again
    list(warm.render(_job(tmp_path), harness.clip(2)))
    assert warm.stats.session_loads == 0


def test_refusal_carries_facefusions_reason_in_both_engines(
    warm: WarmFaceFusionEngine, tmp_path: Path, per_segment: FaceFusionEngine
) -> None:
    # GIVEN a source image without a face (the stand-in detector sees none in a dark frame)
    faceless = np.zeros_like(harness.face_image())
    # WHEN either engine renders THEN it fails with FaceFusion's own words
    for engine in (per_segment, warm):
        with pytest.raises((EngineError, InputRejected), match="no source face detected") as refusal:
            list(engine.render(_job(tmp_path, source=faceless), harness.clip(3)))
        # AND each says the refusal is of the job's inputs: no worker retries it
        assert isinstance(refusal.value, InputRejected) and not retryable(refusal.value), engine
    # AND the warm engine renders the next job as before
    frames = harness.clip(2)
    _assert_swapped(frames, list(warm.render(_job(tmp_path), frames)))


def test_content_analyser_refuses_in_both_engines(
    warm: WarmFaceFusionEngine, tmp_path: Path, per_segment: FaceFusionEngine
) -> None:
    # GIVEN a target the stand-in content analyser flags (mostly red)
    frames = [Frame(index, harness.red_image()) for index in range(3)]
    # WHEN either engine renders it THEN it is refused, naming FaceFusion's content analyser
    for engine in (per_segment, warm):
        with pytest.raises(EngineError, match="content analyser refused"):
            list(engine.render(_job(tmp_path), frames))


def test_facefusions_own_output_reaches_the_failure_reason_in_both_engines(
    warm: WarmFaceFusionEngine, tmp_path: Path, per_segment: FaceFusionEngine
) -> None:
    # GIVEN a job whose processor's model is not here (the harness has no codeformer, no internet)
    options = {"face_selector_mode": "one", "processors": ["face_swapper", "face_enhancer"],
               "face_enhancer_model": "codeformer"}  # fmt: skip
    # WHEN either engine renders it THEN the reason carries FaceFusion's own lines about that model
    reasons = []
    for engine in (per_segment, warm):
        with pytest.raises(EngineError) as failure:
            list(engine.render(_job(tmp_path, options), harness.clip(2)))
        reasons.append(failure.value.reason)
    for reason in reasons:
        assert "codeformer" in reason, reason
        assert len(reason) < 2600, reason
    # AND the warm engine renders the next job as before
    frames = harness.clip(2)
    _assert_swapped(frames, list(warm.render(_job(tmp_path), frames)))


def test_both_engines_analyse_content_for_the_jobs_verdict_and_then_do_not_decide_again(
    warm: WarmFaceFusionEngine, tmp_path: Path, per_segment: FaceFusionEngine
) -> None:
    # GIVEN a segment that alone would be refused (its only sample is red), of a job whose verdict over
    # the whole video passed
    frames = [Frame(0, harness.red_image()), *harness.clip(2, start=1)]
    decided = replace(_job(tmp_path), content_decided=True)
    for engine in (per_segment, warm):
        # WHEN the job's verdict is made THEN FaceFusion's analyser flags exactly the red frame, in order
        assert engine.analyse_content([harness.face_image(), harness.red_image(), harness.face_image()]) == [
            False, True, False,
        ]  # fmt: skip
        # AND the segment renders every frame, swapped, without FaceFusion deciding again
        _assert_swapped(frames[1:], list(engine.render(decided, frames))[1:])
        # AND without the job's verdict FaceFusion still decides per run, as before
        with pytest.raises(EngineError, match="content analyser refused"):
            list(engine.render(_job(tmp_path), frames))
    list(warm.render(decided, frames))
    assert warm.stats.sampled == 0


def test_warm_process_that_died_is_replaced(home: harness.Harness, tmp_path: Path) -> None:
    # GIVEN a warm engine whose FaceFusion process was killed between segments
    engine = WarmFaceFusionEngine(_settings(home), harness.CPU_FACTS, env=home.env)
    assert isinstance(engine, Engine)
    engine.prepare()
    process = engine._process
    assert process is not None
    os.kill(process.pid, signal.SIGKILL)
    process._process.wait()
    # WHEN the next segment comes THEN a new process renders it
    frames = harness.clip(2)
    _assert_swapped(frames, list(engine.render(_job(tmp_path), frames)))
    assert engine._process is not None and engine._process.pid != process.pid
    # AND closing the engine ends its FaceFusion process
    replacement = engine._process
    engine.close()
    assert not replacement.alive()


def test_segment_abandoned_mid_way_leaves_the_engine_usable(home: harness.Harness, tmp_path: Path) -> None:
    # GIVEN a warm engine whose consumer stops reading after 2 of 8 frames (a warm stop, a failed encoder)
    engine = WarmFaceFusionEngine(_settings(home), harness.CPU_FACTS, env=home.env)
    engine.prepare()
    outputs = engine.render(_job(tmp_path), harness.clip(8))
    assert isinstance(outputs, Generator)
    assert [next(outputs).shape for _ in range(2)] == [(240, 320, 3)] * 2
    outputs.close()
    # WHEN the next segment comes THEN it gets exactly its own frames, swapped
    frames = harness.clip(3, start=50)
    _assert_swapped(frames, list(engine.render(_job(tmp_path), frames)))
    engine.close()


def test_hung_facefusion_is_stopped_with_a_reason_and_replaced(home: harness.Harness, tmp_path: Path) -> None:
    # GIVEN a warm engine with a 3 s step limit whose FaceFusion process stops answering
    settings = EngineSettings(home=home.home, python=home.python, timeout_base_s=3.0)
    engine = WarmFaceFusionEngine(settings, harness.CPU_FACTS, env=home.env)
    engine.prepare()
    hung = engine._process
    assert hung is not None
    os.kill(hung.pid, signal.SIGSTOP)
    # WHEN a segment comes THEN it fails, saying FaceFusion did not answer, and the process is gone
    with pytest.raises(EngineError, match="did not answer"):
        list(engine.render(_job(tmp_path), harness.clip(2)))
    assert not hung.alive()
    # AND the next segment gets a new process (given time to load its models on a busy machine)
    engine._settings = replace(settings, timeout_base_s=120.0)
    frames = harness.clip(2)
    _assert_swapped(frames, list(engine.render(_job(tmp_path), frames)))
    engine.close()


ENGINE_PROCESS = """
import os, sys, time
from pathlib import Path
from gpu_worker.engines.facefusion.execution import HostFacts
from gpu_worker.engines.facefusion.settings import EngineSettings
from gpu_worker.delivery.retry import retryable
from gpu_worker.engines.facefusion.warm import WarmFaceFusionEngine

facts = HostFacts(providers=("CPUExecutionProvider",), device_count=0, cpu_count=2)
engine = WarmFaceFusionEngine(EngineSettings(home=Path(sys.argv[1]), python=sys.argv[2]), facts, env=os.environ)
engine.prepare()
print(engine._process.pid, flush=True)
time.sleep(600)
"""


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_facefusion_dies_with_the_engine_process(home: harness.Harness) -> None:
    # GIVEN an engine process (as the engine host runs one per worker) with its warm FaceFusion
    import subprocess
    import sys
    import time

    engine_process = subprocess.Popen(
        [sys.executable, "-c", ENGINE_PROCESS, str(home.home), home.python],
        cwd=harness.REPO, env={**home.env, "PYTHONPATH": str(harness.REPO)}, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert engine_process.stdout is not None
    facefusion_pid = int(engine_process.stdout.readline())
    assert _running(facefusion_pid)
    # WHEN the engine process is killed (the host does so on a hang, and recycles it)
    engine_process.kill()
    engine_process.wait()
    # THEN FaceFusion goes with it: it holds no GPU for a dead engine
    deadline = time.monotonic() + 10
    while _running(facefusion_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(facefusion_pid)


def test_facefusions_own_parser_refuses_what_it_does_not_take(warm: WarmFaceFusionEngine, tmp_path: Path) -> None:
    # GIVEN an argv FaceFusion's parser refuses (the engine's own checks would stop it earlier)
    from gpu_worker.engines.facefusion.warm import _segment_paths, segment_argv
    from gpu_worker.engines.facefusion.warm_process import deadline

    process = warm._process
    assert process is not None
    argv = [*segment_argv(_segment_paths(tmp_path, 1), {}, []), "--face-detector-size", "320x320"]
    # WHEN the warm process is asked to configure with it
    process.send({"op": "segment", "argv": argv, "check_key": argv, "fps": 25.0})
    header, _ = process.receive(deadline(30), "checking")
    # THEN it refuses with argparse's words from FaceFusion's program, and stays warm
    assert header["op"] == "refused" and "invalid choice: '320x320'" in header["reason"]
    frames = harness.clip(2)
    _assert_swapped(frames, list(warm.render(_job(tmp_path), frames)))


def test_a_later_jobs_detector_options_are_not_answered_from_the_earlier_jobs_faces(
    warm: WarmFaceFusionEngine, tmp_path: Path, per_segment: FaceFusionEngine
) -> None:
    # GIVEN a warm engine that rendered job A (FaceFusion's default detector score, 0.5)
    frames = harness.clip(2)
    _assert_swapped(frames, list(warm.render(_job(tmp_path), frames)))
    # AND job B, the same but for a detector score the stand-in's face (brightness ~0.76) does not reach
    strict = {"face_selector_mode": "one", "face_detector_score": 0.8}
    # WHEN both engines render B THEN both refuse it as a fresh FaceFusion does: the faces A found
    # in the same pixels were found under other options
    for engine in (per_segment, warm):
        with pytest.raises((EngineError, InputRejected), match="no source face detected"):
            list(engine.render(_job(tmp_path, strict), frames))
    # AND back on A's options the warm engine swaps again
    _assert_swapped(frames, list(warm.render(_job(tmp_path), frames)))


CONCURRENT_FIRST_USE = """
import os, sys, threading, time
sys.path.insert(0, os.getcwd())
sys.path.insert(0, sys.argv[1])
from facefusion import inference_manager, state_manager

create = inference_manager.create_inference_session

def slow(*args, **kwargs):
    time.sleep(0.3)  # a real model takes seconds to load: the window the threads meet in
    return create(*args, **kwargs)

inference_manager.create_inference_session = slow
import warm_server

engine = warm_server.FaceFusion()
for name, value in (("execution_device_ids", [0]), ("execution_providers", ["cpu"]), ("download_scope", "lite"),
                    ("download_providers", ["github"]), ("face_swapper_model", "hyperswap_1a_256")):
    state_manager.init_item(name, value)
from facefusion.processors.modules.face_swapper import core as face_swapper

together = threading.Barrier(4)

failures = []

def first_use():
    together.wait()
    try:
        face_swapper.get_inference_pool()
    except Exception as error:
        failures.append(repr(error))

threads = [threading.Thread(target=first_use) for _ in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
if failures:
    sys.exit("; ".join(failures))
print(" ".join(engine.loaded))
"""


def test_threads_that_first_need_a_model_together_create_one_session(home: harness.Harness) -> None:
    # GIVEN the warm process's FaceFusion, and 4 threads that first need the swapper at once (frames
    # rendered together after a faceless first frame), its sessions slow to create as real ones are
    import subprocess

    from gpu_worker.engines.facefusion import warm_server

    script = [home.python, "-c", CONCURRENT_FIRST_USE, str(Path(warm_server.__file__).parent)]
    # WHEN they ask FaceFusion for its pool
    done = subprocess.run(script, cwd=home.home, env=home.env, capture_output=True, text=True, timeout=120, check=False)
    # THEN one inference session was created, not one per thread
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["hyperswap_1a_256.onnx"]


SHAPE_PROBE = """
import json, sys
import numpy, onnxruntime

refused = {}
for model, feeds in json.loads(sys.argv[1]).items():
    session = onnxruntime.InferenceSession(f".assets/models/{model}", providers=["CPUExecutionProvider"])
    inputs = {name: numpy.zeros(shape, numpy.float32) for name, shape in feeds.items()}
    try:
        session.run(None, inputs)
        refused[model] = False
    except Exception:
        refused[model] = True
print(json.dumps(refused))
"""


def test_stand_ins_refuse_what_the_real_models_refuse(home: harness.Harness) -> None:
    # GIVEN inputs of shapes the real models do not take (another detector size, a 128² recogniser
    # crop, a 256-value embedding for inswapper, inswapper's 128² crop for hyperswap)
    import subprocess

    wrong = {
        "yoloface_8n.onnx": {"input": [1, 3, 320, 320]},
        "arcface_w600k_r50.onnx": {"input": [1, 3, 128, 128]},
        "inswapper_128.onnx": {"source": [1, 256], "target": [1, 3, 128, 128]},
        "hyperswap_1a_256.onnx": {"source": [1, 512], "target": [1, 3, 128, 128]},
    }
    # WHEN FaceFusion's onnxruntime runs the stand-ins on them
    done = subprocess.run(
        [home.python, "-c", SHAPE_PROBE, json.dumps(wrong)],
        cwd=home.home, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    # THEN every one is refused, as the real model would be
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == dict.fromkeys(wrong, True)


def test_a_new_option_set_releases_the_sessions_it_no_longer_uses(warm: WarmFaceFusionEngine, tmp_path: Path) -> None:
    # GIVEN a warm engine that rendered a job with the face enhancer (its sessions loaded)
    enhanced = {"face_selector_mode": "one", "processors": ["face_swapper", "face_enhancer"]}
    list(warm.render(_job(tmp_path, enhanced), harness.clip(2)))
    # WHEN a job of another option set, without the enhancer, renders two segments
    plain = {"face_selector_mode": "one", "face_swapper_weight": 0.6}
    list(warm.render(_job(tmp_path, plain), harness.clip(2)))
    first = warm.stats.released
    list(warm.render(_job(tmp_path, plain), harness.clip(2, start=2)))
    # THEN its first segment released the enhancer's sessions (those it did not ask for), and kept its own;
    # its next segment released nothing and created nothing
    assert "face_enhancer" in first and "face_swapper" not in first, first
    assert warm.stats.released == () and warm.stats.session_loads == 0

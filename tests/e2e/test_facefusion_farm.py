"""A farm job on the warm FaceFusion engine: FaceFusion 3.8.1's own code with the harness's stand-in models.

The local stack's two workers run the `facefusion` engine (warm: one FaceFusion process per worker)
from the harness's FaceFusion folder (fleetctl/harness/facefusion.py); a 12 s clip of the
harness's face goes through S3 → slicer → Map → workers → merge → SNS in several segments. The
stand-in swapper inverts the face region, so a swapped frame is recognisable. Each warm segment
logs the inference sessions it created (gpu_worker/engines/facefusion/warm.py): a worker's first
segment loads the models, every later segment and job none. Skipped with the reason where the
harness cannot run (no FaceFusion checkout or no `.venv-facefusion`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from fusionfleet import layout
from fusionfleet.adapters.orchestrator import execution_arn
from fusionfleet.jobs.ids import job_id
from tests.e2e.conftest import Stack
from tests.e2e.helpers import facefusion_stack, notice_for, output_of
from tests.support import facefusion_harness as harness
from tests.support.media import decode_all, write_video

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(900),
    pytest.mark.usefixtures("facefusion_harness"),  # skipped where the harness is missing, failed in CI
]

SECONDS, FPS = 12, 25
FRAMES = SECONDS * FPS
WARM_LINE = re.compile(
    r"warm FaceFusion (\d+): (\d+) frames, (\d+) inference sessions created \(.*?\), (\d+) frames analysed"
)
Warm = tuple[str, int, int, int, int]  # worker, FaceFusion's pid, frames, sessions created, frames analysed


@pytest.fixture(scope="module")
def farm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A local stack of its own whose 2 workers run the harness's FaceFusion."""
    home = harness.prepare(tmp_path_factory.mktemp("facefusion-home"))  # (skips first where it cannot run)
    with facefusion_stack(home, tmp_path_factory.mktemp("facefusion-stack"), 2) as stack:
        yield stack


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12 s of the harness's face (its background shade steps, so frames differ), with audio."""
    path = tmp_path_factory.mktemp("facefusion-clip") / "face.mp4"
    frames = [harness.face_image(shade=(index // 5) % 8) for index in range(FRAMES)]
    width, height = harness.SIZE
    return write_video(path, seconds=SECONDS, fps=FPS, width=width, height=height, frames=frames, crf=12)


def drop(stack: Stack, name: str, clip: Path, options: dict[str, Any]) -> str:
    """The harness's face as the source, the clip as the target, a `facefusion` manifest; the job id."""
    s3, bucket = stack.client("s3"), stack.resources.media_bucket
    ok, face = cv2.imencode(".png", harness.face_image())
    assert ok
    s3.put_object(Bucket=bucket, Key=f"inputs/{name}/face.png", Body=face.tobytes())
    s3.upload_file(str(clip), bucket, f"inputs/{name}/{clip.name}")
    manifest = {"version": 1, "source": [f"inputs/{name}/face.png"], "target": f"inputs/{name}/{clip.name}",
                "engine": "facefusion", "priority": "high", "quality": "realtime", "options": options}  # fmt: skip
    etag = s3.put_object(Bucket=bucket, Key=f"jobs/{name}.json", Body=json.dumps(manifest).encode())["ETag"]
    return job_id(bucket, f"jobs/{name}.json", etag)


def warm_segments(stack: Stack) -> list[Warm]:
    """Every warm segment's line, in each worker's order."""
    found = []
    for process in stack.state().by_role("worker"):
        for match in WARM_LINE.finditer(stack.worker_log(process.name)):
            found.append((process.name, int(match[1]), int(match[2]), int(match[3]), int(match[4])))
    return found


def all_logs(stack: Stack) -> str:
    return "\n".join(log.read_text(errors="replace") for log in sorted((stack.state_dir / "logs").glob("*.log")))


def swapped_share(source: np.ndarray, output: np.ndarray) -> tuple[float, float]:
    """(distance of the face's middle from 255 - source, distance of the rest from the source)."""
    ys, xs = harness.face_core()
    inverted = float(np.abs(output[ys, xs].astype(int) - (255 - source[ys, xs].astype(int))).mean())
    kept = float(np.abs(harness.outside_face(output).astype(int) - harness.outside_face(source).astype(int)).mean())
    return inverted, kept


def test_a_job_renders_on_the_warm_engine_frame_exact_and_a_second_job_gets_its_own_options(
    farm: Stack, clip: Path, tmp_path: Path
) -> None:
    # GIVEN the farm on FaceFusion's own code and a 12 s clip with audio
    inbox = farm.subscribe()
    # WHEN job A is dropped, in FaceFusion's default selector mode (the face like the reference frame's)
    first = drop(farm, "ff-a", clip, {"face_selector_mode": "reference"})
    notice = notice_for(farm, inbox, first, wait_s=600)
    # THEN it succeeds, in several segments, every frame there, timed as the source, with its audio
    assert notice["status"] == "succeeded", (notice, farm.logs())
    s3, work = farm.client("s3"), farm.resources.work_bucket
    plan = json.loads(s3.get_object(Bucket=work, Key=layout.plan_key(first))["Body"].read())
    assert len(plan) >= 3, plan
    source_info, source_frames = decode_all(clip)
    info, frames = decode_all(output_of(farm, notice, tmp_path))
    assert len(frames) == info.frame_count == source_info.frame_count == FRAMES
    assert abs(info.duration_s - source_info.duration_s) <= 1 / FPS
    assert len(info.audio) == 1 and abs(info.audio[0].duration_s - source_info.audio[0].duration_s) <= 1 / FPS
    # AND FaceFusion swapped the face in every frame (the encoders' loss aside) and left the rest alone
    for index, (source, output) in enumerate(zip(source_frames, frames, strict=True)):
        inverted, kept = swapped_share(source, output)
        assert inverted < 12 and kept < 6, (index, inverted, kept)
    # AND the job-level decisions were made once: the reference frame by the slicer, the content
    # verdict over the whole target in a step of its own, ended before the Map sent any segment, and no
    # segment's FaceFusion analysed frames again
    s3.head_object(Bucket=work, Key=layout.reference_frame_key(first))
    verdict = json.loads(s3.get_object(Bucket=work, Key=layout.content_analysis_key(first))["Body"].read())
    assert verdict["sampled"] == FRAMES // FPS and verdict["flagged"] == 0, verdict
    made = re.findall(rf"{first}: content analysis over the whole target.*", all_logs(farm))
    assert len([line for line in made if "another worker's" not in line]) == 1, made
    assert re.search(rf"content analysis of {first}: 0 of {FRAMES // FPS} sampled frames flagged", all_logs(farm))
    assert "this segment makes it" not in all_logs(farm)
    steps = states_in_order(farm, first)
    assert steps.index("AnalyseHigh") < steps.index("RenderSegments"), steps
    segments = warm_segments(farm)
    assert sum(segment[2] for segment in segments) >= FRAMES
    # (the frames crossed to FaceFusion's process in shared memory, not the pipe: docs/occupancy.md)
    assert all_logs(farm).count("frames through shared memory") >= len(segments), segments
    assert all(segment[4] == 0 for segment in segments), segments
    # AND each worker's warm FaceFusion created its sessions for its first segment only
    check_warm(segments)

    # WHEN job B, which differs only by a detector score the face (brightness ~0.76) does not reach, runs
    # on the same warm workers
    second = drop(farm, "ff-b", clip, {"face_selector_mode": "reference", "face_detector_score": 0.8})
    refused = notice_for(farm, inbox, second, wait_s=600)
    # THEN it is refused with FaceFusion's reason, as a fresh FaceFusion refuses it, not answered from
    # job A's faces; and at once: the same inputs fail alike on every worker, so none is retried
    assert refused["status"] == "failed", refused
    assert "no source face detected" in json.dumps(refused), refused
    attempts = re.findall(rf"segment \d+ of {second}: attempt (\d+) failed", all_logs(farm))
    assert attempts and set(attempts) == {"1"}, attempts

    # WHEN job C asks for a detector score the face does reach, on the same warm workers
    third = drop(farm, "ff-c", clip, {"face_selector_mode": "reference", "face_detector_score": 0.6})
    notice = notice_for(farm, inbox, third, wait_s=600)
    # THEN it renders as job A did, and no warm segment of it created an inference session
    assert notice["status"] == "succeeded", (notice, farm.logs())
    (tmp_path / "c").mkdir()
    _, again = decode_all(output_of(farm, notice, tmp_path / "c"))
    assert len(again) == FRAMES
    assert max(float(np.abs(a.astype(int) - b.astype(int)).mean()) for a, b in zip(frames, again, strict=True)) < 1
    every = warm_segments(farm)
    assert sum(segment[2] for segment in every[len(segments) :]) >= FRAMES
    check_warm(every)


def test_a_target_the_content_analyser_refuses_fails_in_its_analysis_step_before_any_segment(
    farm: Stack, tmp_path: Path
) -> None:
    # GIVEN a 6 s clip whose frames the stand-in content analyser flags (red), as a FaceFusion job
    inbox = farm.subscribe()
    frames = [harness.red_image() for _ in range(6 * FPS)]
    width, height = harness.SIZE
    red = write_video(tmp_path / "red.mp4", seconds=6, fps=FPS, width=width, height=height, frames=frames)
    job = drop(farm, "ff-red", red, {"face_selector_mode": "many"})
    # WHEN it runs THEN its analysis step refuses it with FaceFusion's numbers, in the notice's own stage
    notice = notice_for(farm, inbox, job, wait_s=600)
    assert (notice["status"], notice["stage"], notice["error"]) == ("failed", "analysis", "InputRejected"), notice
    assert "content analyser refused the target: it flagged 6 of the 6 frames sampled" in notice["reason"]
    # AND no segment was sent: the Map never started and no worker rendered a frame of it
    steps = states_in_order(farm, job)
    assert "AnalyseHigh" in steps and "RenderSegments" not in steps, steps
    s3, work = farm.client("s3"), farm.resources.work_bucket
    assert s3.list_objects_v2(Bucket=work, Prefix=layout.segments_prefix(job)).get("KeyCount", 0) == 0


def states_in_order(stack: Stack, job: str) -> list[str]:
    """The states the job's first execution entered, in order."""
    arn = execution_arn(stack.resources.state_machine_arn, job)
    events = stack.client("stepfunctions").get_execution_history(executionArn=arn, maxResults=1000)["events"]
    return [event["stateEnteredEventDetails"]["name"] for event in events if "stateEnteredEventDetails" in event]


def check_warm(segments: list[Warm]) -> None:
    """Per FaceFusion process: sessions on its first segment, none on any later one."""
    seen: set[int] = set()
    for worker, pid, _, created, _ in segments:
        if pid in seen:
            assert created == 0, (worker, pid, segments)
        else:
            assert created > 0, (worker, pid, segments)
            seen.add(pid)
    assert len(segments) > len(seen), f"no process rendered a second segment: {segments}"


def test_a_test_render_with_the_tracker_on_is_the_full_renders_frame(farm: Stack, tmp_path: Path) -> None:
    # GIVEN a 4 s clip of the harness's person swinging, hidden in frames 48-49 and 98-99 (the tracker fills
    # them from the frames around, after them too), rendered whole with the tracker on
    from benchmarks.parity.clips import ClipSpec, faces_at, write_clip, write_source
    from benchmarks.parity.codes import face_origin, read
    from benchmarks.parity.media import frames as frames_of

    spec = ClipSpec(seconds=4.0, scene="blink")
    clip = write_clip(tmp_path / "blink.mp4", spec)
    face = write_source(tmp_path / "face.png")
    common = ("--source", str(face), "--target", str(clip), "--engine", "facefusion", "--face-tracker-score", "0.3",
              "--output-video-quality", "98")  # fmt: skip
    full = farm.cli("submit", *common, "--priority", "high", "--wait", "--output", str(tmp_path / "full.mp4"),
                    timeout=800)  # fmt: skip
    assert full.returncode == 0, full.stderr
    # WHEN a test render asks for frames whose tracker window reaches past them: a hidden frame, the frame
    # before one, and a visible frame after one
    frames = [47, 48, 50]
    out = tmp_path / "pictures"
    trial = farm.cli("try", *common, "--frames", ",".join(map(str, frames)), "--output-dir", str(out), timeout=800)
    assert trial.returncode == 0, trial.stderr
    # THEN each picture is the full render's same frame: the same pixels up to the encoder's loss, and the face
    # the full render drew there (its code read where the person stands in the neighbouring frames)
    rendered = frames_of(tmp_path / "full.mp4")
    assert len(rendered) == spec.frames
    for frame in frames:
        picture = cv2.imread(str(out / f"frame-{frame:06d}.png"))
        assert picture is not None, frame
        error = float(np.mean((picture.astype(float) - rendered[frame].astype(float)) ** 2))
        same = 10 * np.log10(255.0**2 / max(error, 1e-9))
        print(f"frame {frame}: {same:.2f} dB from the full render's")
        assert same >= 38.0, (frame, same)  # as tests/e2e/test_trial.py: the full render's 4:2:0 encode
        for placed in faces_at(spec, frame - 1 if frame in (48, 49) else frame):
            origin = face_origin(placed.x, placed.y, 1.0)
            mine, theirs = read(np.asarray(picture, np.uint8), origin, 1.0), read(rendered[frame], origin, 1.0)
            assert mine is not None and theirs is not None and not mine.differs(theirs, 12.0), (frame, mine, theirs)

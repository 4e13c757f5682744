"""Several faces on several people on the local stack (issue 32): two sources mapped to two people who
cross over, each person getting the face mapped to them in every judged frame of every segment.

The clip (benchmarks.clips.crossing_pair): Grace Hopper along the top and the astronaut along the
bottom walk past each other every 1.5 s. The job maps the astronaut's photo onto Grace Hopper (named
by a reference image of her) and Grace Hopper's portrait onto the astronaut (named by frame 0 of the
target and her position in it), so each person gets the other's face. The judge (benchmarks.judge,
dlib's CNN detector and descriptor, independent of the engine's swap) tells per frame and person
whose face the output shows; where each person is comes from the clip, not the engine.
"""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import pytest

from benchmarks.clips import FPS, HEIGHT, WIDTH, crossing_pair, pair_positions
from benchmarks.judge import Judge, video_frames
from benchmarks.mapping_judge import judge_frame, source_identity, summary
from fleetctl.samples import astronaut, grace_hopper, grace_hopper_path, write_video
from fusionfleet import layout
from tests.e2e.conftest import Stack
from tests.e2e.helpers import notice_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

FRAMES = 150  # 6 s: two segments or more, four crossings
JUDGE_EVERY = 5  # frames (and each segment's first and last); the judge's CNN detector is the slow part


@pytest.fixture(scope="module")
def pair_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("faces") / "pair.mp4"
    return write_video(path, seconds=FRAMES / FPS, fps=FPS, width=WIDTH, height=HEIGHT, frames=crossing_pair(FRAMES))


def drop_mapping(stack: Stack, name: str, clip: Path, engine: str, options: dict[str, str] | None = None) -> str:
    s3, bucket = stack.client("s3"), stack.resources.media_bucket
    prefix = f"inputs/{name}/"
    s3.upload_file(str(grace_hopper_path()), bucket, f"{prefix}grace.jpg")
    ok, png = cv2.imencode(".png", astronaut())
    assert ok
    s3.put_object(Bucket=bucket, Key=f"{prefix}astronaut.png", Body=png.tobytes())
    s3.upload_file(str(clip), bucket, f"{prefix}{clip.name}")
    manifest = {
        "version": 1, "target": f"{prefix}{clip.name}", "engine": engine, "quality": "balanced", "priority": "high",
        "options": {"face_selector_order": "top-bottom"} if options is None else options,
        "faces": [
            # Grace Hopper (named by a picture of her) gets the astronaut's face ...
            {"source": f"{prefix}astronaut.png", "reference": f"{prefix}grace.jpg"},
            # ... and the astronaut (the lower face of frame 0) gets Grace Hopper's
            {"source": [f"{prefix}grace.jpg"], "reference_frame": 0, "reference_face_position": 1},
        ],
    }  # fmt: skip
    etag = s3.put_object(Bucket=bucket, Key=f"jobs/{name}.json", Body=json.dumps(manifest).encode())["ETag"]
    from fusionfleet.jobs.ids import job_id

    return job_id(bucket, f"jobs/{name}.json", etag)


@pytest.mark.long  # `make e2e-long` (minutes of classic rendering and CNN judging); make test keeps the refusal
def test_two_sources_go_on_two_people_in_every_frame_of_every_segment(
    stack: Stack, pair_clip: Path, tmp_path: Path
) -> None:
    inbox = stack.subscribe()
    job = drop_mapping(stack, "faces-pair", pair_clip, "classic")
    notice = notice_for(stack, inbox, job, wait_s=600)
    assert notice["status"] == "succeeded", notice
    output = tmp_path / "out.mp4"
    stack.client("s3").download_file(stack.resources.media_bucket, notice["output"]["key"], str(output))
    s3, work = stack.client("s3"), stack.resources.work_bucket
    plan = json.loads(s3.get_object(Bucket=work, Key=layout.plan_key(job))["Body"].read())
    assert len(plan) >= 2
    segments = [(segment["start_frame"], segment["end_frame"]) for segment in plan]

    targets, outputs = list(video_frames(pair_clip)), list(video_frames(output))
    assert len(outputs) == len(targets) == FRAMES
    judge = Judge()
    sources = {"grace": source_identity(judge, grace_hopper()), "astronaut": source_identity(judge, astronaut())}
    mapping = {"grace": "astronaut", "astronaut": "grace"}
    # Every segment's first and last frames, and every JUDGE_EVERY-th frame between.
    frames = sorted({i for start, end in segments for i in (start, end - 1)} | set(range(0, FRAMES, JUDGE_EVERY)))
    rows = [
        row
        for i in frames
        for row in judge_frame(judge, i, targets[i], outputs[i], pair_positions(i), mapping, sources)
    ]
    result = summary(rows, segments)
    print(json.dumps({key: value for key, value in result.items() if key != "wrong"}))
    # THEN the judge saw both people in most frames, in every segment ...
    assert all(segment["judged"] >= 0.8 * 2 * (segment["end"] - segment["start"]) / JUDGE_EVERY
               for segment in result["segments"]), result["segments"]  # fmt: skip
    # ... and each got the face mapped to them in every judged frame, across the crossings
    assert result["wrong"] == [], result["wrong"]


def test_an_engine_that_swaps_no_faces_refuses_faces_at_submit_naming_what_to_do(stack: Stack, pair_clip: Path) -> None:
    # (the facefusion engine renders `faces` as one pass per person: tests/integration/engines/test_facefusion_faces.py)
    inbox = stack.subscribe()
    job = drop_mapping(stack, "faces-copy", pair_clip, "copy", options={})  # (copy applies no selector option)
    notice = notice_for(stack, inbox, job, wait_s=180)
    assert notice["status"] == "failed", notice
    reason = json.dumps(notice)
    assert "the copy engine swaps no faces; use classic" in reason, notice

"""The slicer and a test render's manifest (`frames`): one-frame segments warmed from the whole job's
segments, the output a prefix of pictures; frames past the end and image targets are rejected by name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fleetctl.samples import grace_hopper_path
from fusionfleet import layout
from tests.integration.conftest import Aws, s3_event, upload
from tests.integration.test_slicer_handler import MANIFEST, invoke, put_manifest, slicer_env

__all__ = ["slicer_env"]  # the fixture, used by name


def test_a_test_render_plans_one_frame_segments_warmed_from_the_whole_jobs(slicer_env: Aws, clip: Path) -> None:
    aws = slicer_env
    upload(aws, "inputs/face.jpg", grace_hopper_path())
    upload(aws, "inputs/clip.mp4", clip)
    job = put_manifest(aws, "jobs/try.json", {**MANIFEST, "frames": [99, 0, 60]})
    assert invoke(s3_event(aws.media_bucket, "jobs/try.json")) == {"batchItemFailures": []}
    (execution,) = aws.executions()
    payload = json.loads(aws.sfn.describe_execution(executionArn=execution["executionArn"])["input"])
    # The output is the job's prefix: the merge writes one picture per frame under it.
    assert payload["job"]["output"]["key"] == "outputs/try/" and payload["job"]["trial_frames"] == [99, 0, 60]
    assert payload["job"]["image"] is None
    plan = json.loads(aws.s3.get_object(Bucket=aws.work_bucket, Key=layout.plan_key(job))["Body"].read())
    assert [(item["start_frame"], item["end_frame"]) for item in plan] == [(99, 100), (0, 1), (60, 61)]
    # Each frame's engine starts where the whole job's segment holding it starts.
    assert all(item["warm_from"] <= item["start_frame"] for item in plan)
    assert aws.notifications() == []


def test_a_poster_strip_renders_frames_the_slicer_spreads_over_the_trimmed_target(slicer_env: Aws, clip: Path) -> None:
    # GIVEN a 100-frame clip, and test renders that ask for frames spread over it, and over frames [10, 50)
    aws = slicer_env
    upload(aws, "inputs/face.jpg", grace_hopper_path())
    upload(aws, "inputs/clip.mp4", clip)
    whole = put_manifest(aws, "jobs/strip.json", {**MANIFEST, "engine": "copy", "spread_frames": 5})
    trimmed = put_manifest(aws, "jobs/strip-trim.json", {
        **MANIFEST, "engine": "copy", "spread_frames": 5, "options": {"trim_frame_start": 10, "trim_frame_end": 50},
    })  # fmt: skip
    put_manifest(aws, "jobs/strip-image.json", {**MANIFEST, "target": "inputs/face.jpg", "spread_frames": 3})
    events = [s3_event(aws.media_bucket, f"jobs/{name}.json") for name in ("strip", "strip-trim", "strip-image")]
    assert invoke(*events) == {"batchItemFailures": []}
    # THEN the slicer chose the frames, first and last included, and planned one picture each
    contexts = {}
    for execution in aws.executions():
        job = json.loads(aws.sfn.describe_execution(executionArn=execution["executionArn"])["input"])["job"]
        contexts[job["job_id"]] = job
    assert contexts[whole]["trial_frames"] == [0, 25, 50, 74, 99] and contexts[whole]["image"] is None
    assert contexts[trimmed]["trial_frames"] == [10, 20, 30, 39, 49]
    plan = json.loads(aws.s3.get_object(Bucket=aws.work_bucket, Key=layout.plan_key(whole))["Body"].read())
    assert [(item["start_frame"], item["end_frame"]) for item in plan] == [(f, f + 1) for f in (0, 25, 50, 74, 99)]
    # AND an image target is refused by name, as with `frames`
    reasons = [str(notice["reason"]) for notice in aws.notifications()]
    assert len(reasons) == 1 and "an image target is rendered whole" in reasons[0], reasons


def test_frames_past_the_end_and_image_targets_are_rejected_by_name(slicer_env: Aws, clip: Path) -> None:
    aws = slicer_env
    upload(aws, "inputs/face.jpg", grace_hopper_path())
    upload(aws, "inputs/clip.mp4", clip)
    put_manifest(aws, "jobs/past.json", {**MANIFEST, "frames": [5, 100]})
    put_manifest(aws, "jobs/image.json", {**MANIFEST, "target": "inputs/face.jpg", "frames": [0]})
    invoke(s3_event(aws.media_bucket, "jobs/past.json"), s3_event(aws.media_bucket, "jobs/image.json"))
    reasons = sorted(str(notice["reason"]) for notice in aws.notifications())
    assert aws.executions() == []
    assert any("frames: 100 past the target's last frame (99)" in reason for reason in reasons), reasons
    assert any("an image target is rendered whole" in reason for reason in reasons), reasons


def test_each_frame_warms_from_the_frames_its_engine_says_it_depends_on(slicer_env: Aws, clip: Path) -> None:
    # GIVEN the same frames asked of an engine that carries no state (copy), of one that does (classic), and
    # of FaceFusion with its tracker on (the 2 frames each side of a frame)
    aws = slicer_env
    upload(aws, "inputs/face.jpg", grace_hopper_path())
    upload(aws, "inputs/clip.mp4", clip)
    asked: dict[str, dict[str, Any]] = {
        "copy": {"engine": "copy"},
        "classic": {"engine": "classic"},
        "facefusion": {"engine": "facefusion", "options": {"face_tracker_score": 0.3}},
    }
    warm = {}
    for name, fields in asked.items():
        job = put_manifest(aws, f"jobs/try-{name}.json", {**MANIFEST, **fields, "frames": [99, 0, 60]})
        assert invoke(s3_event(aws.media_bucket, f"jobs/try-{name}.json")) == {"batchItemFailures": []}
        plan = json.loads(aws.s3.get_object(Bucket=aws.work_bucket, Key=layout.plan_key(job))["Body"].read())
        warm[name] = [item["warm_from"] for item in plan]
    # THEN the copy engine's frames start at themselves, FaceFusion's 2 frames before, and the classic engine's
    # where the whole job's segment holding each starts (this 4 s clip is one segment)
    assert warm == {"copy": [99, 0, 60], "facefusion": [97, 0, 58], "classic": [0, 0, 0]}

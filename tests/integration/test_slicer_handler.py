"""The slicer Lambda handler on moto: events in, executions / rejection notices out."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

from fleetctl.samples import grace_hopper_path, read_stamp
from functions.slicer import app
from fusionfleet import layout
from fusionfleet.jobs.ids import job_id
from infra.emulators.event_source import LambdaContext
from tests.integration.conftest import FIXTURES, Aws, s3_event, sqs_event, upload
from tests.support.hostile import HOSTILE_TARGETS, SECRET
from tests.support.media import ffmpeg

MANIFEST = {
    "version": 1,
    "source": ["inputs/face.jpg"],
    "target": "inputs/clip.mp4",
    "engine": "copy",
    "priority": "high",
}
# Two people: one named by a picture of them, the other by frame 0 of the target.
FACES: list[dict[str, Any]] = [
    {"source": "inputs/face.jpg", "reference": "inputs/face.jpg"},
    {"source": ["inputs/face.jpg"], "reference_frame": 0},
]
MAPPED = {"version": 1, "target": "inputs/clip.mp4", "priority": "high", "faces": FACES}


@pytest.fixture
def slicer_env(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> Iterator[Aws]:
    monkeypatch.setenv("WORK_BUCKET", aws.work_bucket)
    monkeypatch.setenv("STATE_MACHINE_ARN", aws.state_machine_arn)
    monkeypatch.setenv("NOTIFICATION_TOPIC_ARN", aws.topic_arn)
    monkeypatch.setenv("DEFAULT_ENGINE", "classic")
    app.slicer.cache_clear()
    yield aws
    app.slicer.cache_clear()


@pytest.fixture
def inputs(slicer_env: Aws, clip: Path) -> Aws:
    """The slicer's stack with the manifests' inputs uploaded: the source face and the target clip."""
    upload(slicer_env, "inputs/face.jpg", grace_hopper_path())
    upload(slicer_env, "inputs/clip.mp4", clip)
    return slicer_env


def invoke(*bodies: str) -> dict[str, Any]:
    return app.handler(sqs_event(*bodies), LambdaContext(function_name="slicer", aws_request_id="req"))


def put_manifest(aws: Aws, key: str, manifest: dict[str, Any] | bytes) -> str:
    body = manifest if isinstance(manifest, bytes) else json.dumps(manifest).encode()
    etag = aws.s3.put_object(Bucket=aws.media_bucket, Key=key, Body=body)["ETag"]
    return job_id(aws.media_bucket, key, etag)


def test_manifest_starts_one_execution_with_its_plan(inputs: Aws) -> None:
    # GIVEN media and a manifest whose key needs URL-decoding
    aws = inputs
    key = "jobs/Zoë + friends.json"
    job = put_manifest(aws, key, MANIFEST)
    # WHEN the event arrives
    response = invoke(s3_event(aws.media_bucket, key))
    # THEN one execution named by the job id runs, with the plan in the work bucket
    assert response == {"batchItemFailures": []}
    (execution,) = aws.executions()
    assert execution["name"] == job
    payload = json.loads(aws.sfn.describe_execution(executionArn=execution["executionArn"])["input"])
    assert payload["plan"] == {"bucket": aws.work_bucket, "key": layout.plan_key(job)}
    assert payload["job"]["priority"] == "high" and payload["job"]["engine"] == "copy"
    assert payload["job"]["output"]["key"] == "outputs/Zoë + friends.mp4"
    assert payload["limits"]["render_heartbeat_s"] >= 3600
    plan = json.loads(aws.s3.get_object(Bucket=aws.work_bucket, Key=layout.plan_key(job))["Body"].read())
    assert sum(item["end_frame"] - item["start_frame"] for item in plan) == 100
    assert aws.notifications() == []


def test_duplicate_events_start_one_job(inputs: Aws) -> None:
    aws = inputs
    put_manifest(aws, "jobs/a.json", MANIFEST)
    # WHEN the same event comes twice in one batch and once more later
    invoke(s3_event(aws.media_bucket, "jobs/a.json"), s3_event(aws.media_bucket, "jobs/a.json"))
    invoke(s3_event(aws.media_bucket, "jobs/a.json"))
    # THEN there is one execution
    assert len(aws.executions()) == 1


def test_changed_manifest_under_the_same_key_is_a_new_job(inputs: Aws) -> None:
    aws = inputs
    first = put_manifest(aws, "jobs/a.json", MANIFEST)
    invoke(s3_event(aws.media_bucket, "jobs/a.json"))
    second = put_manifest(aws, "jobs/a.json", {**MANIFEST, "priority": "low"})
    invoke(s3_event(aws.media_bucket, "jobs/a.json"))
    assert first != second
    assert {e["name"] for e in aws.executions()} == {first, second}


@pytest.mark.parametrize(
    ("manifest", "reason"),
    [
        (b"{not json", "the manifest is not valid JSON"),
        ({**MANIFEST, "speed": "fast"}, "speed: unknown field"),
        (
            {**MANIFEST, "options": {"face_selector_mode": "several"}},
            "options.face_selector_mode: 'several' is not one of",
        ),
        ({**MANIFEST, "target": "inputs/missing.mp4"}, "target: s3://media/inputs/missing.mp4 does not exist"),
        # An image is a target too (one frame), but its output is an image.
        ({**MANIFEST, "target": "inputs/face.jpg", "output": "outputs/face.mp4"}, "must end in an image extension"),
        ({**MANIFEST, "source": ["inputs/clip.mp4"]}, "is a video, not an audio file"),
        (
            {**MANIFEST, "engine": "facefusion", "options": {"processors": ["lip_syncer"]}},
            "source: lip_syncer needs an audio file among the sources",
        ),
        (
            {**MANIFEST, "engine": "facefusion", "options": {"workflow_mode": "image-to-image"}},
            "options.workflow_mode: 'image-to-image' renders an image target",
        ),
        # FaceFusion's engine runs `faces` as one pass per person, each picking its person by a reference face.
        (
            {**MAPPED, "engine": "facefusion", "options": {"face_selector_mode": "one"}},
            "so options.face_selector_mode must be 'reference'",
        ),
        ({**MAPPED, "engine": "copy"}, "faces: the copy engine swaps no faces; use classic"),
        # a pass's own options (a job file's remix step) are FaceFusion's engine's only
        (
            {**MAPPED, "engine": "classic", "faces": [FACES[0], {**FACES[1], "options": {"face_enhancer_blend": 50}}]},
            "faces: only the facefusion engine runs a mapping with options of its own",
        ),
    ],
)
def test_bad_jobs_are_rejected_with_a_notice_and_lose_nothing(
    inputs: Aws, manifest: dict[str, Any] | bytes, reason: str
) -> None:
    aws = inputs
    job = put_manifest(aws, "jobs/bad.json", manifest)
    # WHEN the slicer sees it
    response = invoke(s3_event(aws.media_bucket, "jobs/bad.json"))
    # THEN no job starts, the record is not retried, the user is told exactly why
    assert response == {"batchItemFailures": []}
    assert aws.executions() == []
    (notice,) = aws.notifications()
    assert notice["status"] == "failed" and notice["stage"] == "validation" and notice["job_id"] == job
    assert reason in notice["reason"]
    rejection = json.loads(aws.s3.get_object(Bucket=aws.work_bucket, Key=layout.rejection_key(job))["Body"].read())
    assert reason in rejection["reason"]
    # AND the user's files are where they were
    keys = {o["Key"] for o in aws.s3.list_objects_v2(Bucket=aws.media_bucket)["Contents"]}
    assert {"jobs/bad.json", "inputs/face.jpg", "inputs/clip.mp4"} <= keys


def test_a_duplicated_rejection_notifies_once(slicer_env: Aws) -> None:
    aws = slicer_env
    put_manifest(aws, "jobs/bad.json", b"nope")
    invoke(s3_event(aws.media_bucket, "jobs/bad.json"))
    invoke(s3_event(aws.media_bucket, "jobs/bad.json"))
    assert len(aws.notifications()) == 1


def test_the_s3_test_event_and_foreign_keys_are_ignored(slicer_env: Aws) -> None:
    aws = slicer_env
    test_event = (FIXTURES / "s3_test_event.json").read_text()
    response = invoke(test_event, s3_event(aws.media_bucket, "inputs/not-a-manifest.json"))
    assert response == {"batchItemFailures": []}
    assert aws.executions() == [] and aws.notifications() == []


def test_infrastructure_errors_fail_only_their_record(inputs: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a state machine that does not exist (an outage, a misconfiguration)
    aws = inputs
    put_manifest(aws, "jobs/a.json", MANIFEST)
    monkeypatch.setenv("STATE_MACHINE_ARN", aws.state_machine_arn + "-gone")
    app.slicer.cache_clear()
    # WHEN a batch holds that manifest and a test event
    response = invoke(s3_event(aws.media_bucket, "jobs/a.json"), (FIXTURES / "s3_test_event.json").read_text())
    # THEN only the manifest's record is reported failed, so SQS retries just it
    assert response == {"batchItemFailures": [{"itemIdentifier": "m0"}]}


@pytest.mark.parametrize("kind", sorted(HOSTILE_TARGETS))
def test_hostile_targets_are_refused_without_opening_what_they_name(
    slicer_env: Aws, clip: Path, tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    # GIVEN a secret file on the slicer's own disk and a target that tries to make it (or a URL) be read
    aws = slicer_env
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    make, expected = HOSTILE_TARGETS[kind]
    target = make(tmp_path, secret, clip)
    upload(aws, "inputs/face.jpg", grace_hopper_path())
    upload(aws, "inputs/target.bin", target)
    job = put_manifest(aws, "jobs/hostile.json", {**MANIFEST, "target": "inputs/target.bin"})
    # WHEN the slicer handles it
    with caplog.at_level("DEBUG"):
        response = invoke(s3_event(aws.media_bucket, "jobs/hostile.json"))
    # THEN the job is refused, saying what was wrong, and nothing is left to retry
    assert response == {"batchItemFailures": []}
    (notice,) = aws.notifications()
    assert expected in notice["reason"], notice["reason"]
    assert aws.executions() == []
    # AND the secret appears nowhere: not in the notice, the rejection record or the logs
    rejection = aws.s3.get_object(Bucket=aws.work_bucket, Key=layout.rejection_key(job))["Body"].read().decode()
    assert SECRET not in json.dumps(notice) and SECRET not in rejection and SECRET not in caplog.text
    # AND the user's files are still there
    aws.s3.head_object(Bucket=aws.media_bucket, Key="jobs/hostile.json")
    aws.s3.head_object(Bucket=aws.media_bucket, Key="inputs/target.bin")


@pytest.mark.parametrize(
    ("manifest", "reason"),
    [
        ({**MANIFEST, "source": []}, "source: is required"),
        ({**MANIFEST, "target": "../../etc/passwd"}, "target: key '../../etc/passwd' contains empty, '.' or '..'"),
        ({**MANIFEST, "output": "jobs/evil.json"}, "is under a reserved prefix"),
        ({**MANIFEST, "priority": "urgent"}, "priority: 'urgent' is not one of"),
        ({**MANIFEST, "engine": "deepfake9000"}, "engine: 'deepfake9000' is not one of"),
        ({**MANIFEST, "options": {"execution_providers": ["cuda"]}}, "set by the worker"),
        (
            {**MANIFEST, "engine": "classic", "options": {"reference_frame_number": 100}},
            "options.reference_frame_number: 100 is past the target's last frame (99)",
        ),
        (
            {**MANIFEST, "source": ["inputs/gone.jpg", "inputs/also-gone.jpg"]},
            "s3://media/inputs/gone.jpg does not exist; source: s3://media/inputs/also-gone.jpg",
        ),
    ],
)
def test_manifest_problems_are_named(inputs: Aws, manifest: dict[str, Any], reason: str) -> None:
    aws = inputs
    put_manifest(aws, "jobs/m.json", manifest)
    invoke(s3_event(aws.media_bucket, "jobs/m.json"))
    (notice,) = aws.notifications()
    assert reason in notice["reason"], notice["reason"]


def test_a_rejected_manifest_uploaded_again_once_its_media_exists_starts(slicer_env: Aws, clip: Path) -> None:
    # GIVEN a manifest that arrived before its target
    aws = slicer_env
    upload(aws, "inputs/face.jpg", grace_hopper_path())
    job = put_manifest(aws, "jobs/early.json", MANIFEST)
    invoke(s3_event(aws.media_bucket, "jobs/early.json"))
    assert aws.executions() == []
    # WHEN the target is uploaded and the same manifest is uploaded again
    upload(aws, "inputs/clip.mp4", clip)
    assert put_manifest(aws, "jobs/early.json", MANIFEST) == job
    invoke(s3_event(aws.media_bucket, "jobs/early.json"))
    # THEN the job starts and the stale rejection is gone
    assert [e["name"] for e in aws.executions()] == [job]
    assert aws.s3.list_objects_v2(Bucket=aws.work_bucket, Prefix=layout.rejection_key(job)).get("KeyCount") == 0


def test_the_reference_frame_is_decoded_once_per_job_and_travels_with_every_segment(inputs: Aws, clip: Path) -> None:
    # GIVEN a reference-mode job (FaceFusion's default) without a reference image, naming frame 37
    aws = inputs
    job = put_manifest(aws, "jobs/r.json", {**MANIFEST, "engine": "classic", "options": {"reference_frame_number": 37}})
    # WHEN the slicer starts it
    invoke(s3_event(aws.media_bucket, "jobs/r.json"))
    # THEN the job carries frame 37 of the whole target, stored losslessly beside the job
    (execution,) = aws.executions()
    payload = json.loads(aws.sfn.describe_execution(executionArn=execution["executionArn"])["input"])
    ref = payload["job"]["reference_frame"]
    assert ref["bucket"] == aws.work_bucket and ref["key"] == layout.reference_frame_key(job)
    png = aws.s3.get_object(Bucket=aws.work_bucket, Key=ref["key"])["Body"].read()
    stored = np.asarray(cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR), dtype=np.uint8)
    capture = cv2.VideoCapture(str(clip))  # OpenCV's own decoder as the judge
    capture.set(cv2.CAP_PROP_POS_FRAMES, 37)
    ok, expected = capture.read()
    assert ok and stored.shape == expected.shape
    assert read_stamp(stored) == 37 and np.abs(stored.astype(int) - expected).mean() < 1.0


def test_a_job_with_a_reference_image_another_mode_or_no_selector_needs_no_reference_frame(inputs: Aws) -> None:
    aws = inputs
    put_manifest(aws, "jobs/one.json", {**MANIFEST, "engine": "classic", "options": {"face_selector_mode": "one"}})
    put_manifest(aws, "jobs/image.json", {**MANIFEST, "engine": "classic", "reference": "inputs/face.jpg"})
    put_manifest(aws, "jobs/copy.json", MANIFEST)  # an engine without a face selector
    invoke(*(s3_event(aws.media_bucket, f"jobs/{name}.json") for name in ("one", "image", "copy")))
    assert len(aws.executions()) == 3
    for execution in aws.executions():
        payload = json.loads(aws.sfn.describe_execution(executionArn=execution["executionArn"])["input"])
        assert payload["job"]["reference_frame"] is None


def test_a_stale_rejection_that_cannot_be_deleted_starts_nothing(slicer_env: Aws, clip: Path) -> None:
    # GIVEN a rejected manifest, and a work bucket whose policy refuses deletes (a role without
    # s3:DeleteObject: DeleteObjects still answers 200, with the refusal per key)
    aws = slicer_env
    upload(aws, "inputs/face.jpg", grace_hopper_path())
    job = put_manifest(aws, "jobs/early.json", MANIFEST)
    invoke(s3_event(aws.media_bucket, "jobs/early.json"))
    aws.s3.put_bucket_policy(Bucket=aws.work_bucket, Policy=json.dumps(DENY_DELETES))
    # WHEN its media arrives and the same manifest is uploaded again
    upload(aws, "inputs/clip.mp4", clip)
    put_manifest(aws, "jobs/early.json", MANIFEST)
    with pytest.raises(BatchProcessingError) as raised:
        invoke(s3_event(aws.media_bucket, "jobs/early.json"))
    # THEN the record fails, naming the key it could not delete (SQS retries it, then dead-letters
    # it) and nothing started: no execution, no job record, so the farm and `status` agree
    assert f"DeleteFailed: could not delete 1 object(s) in s3://work: {layout.rejection_key(job)}" in str(raised.value)
    assert aws.executions() == []
    assert aws.s3.list_objects_v2(Bucket=aws.work_bucket, Prefix=layout.job_key(job)).get("KeyCount") == 0
    # AND once deletes are allowed again, the retried event starts the job
    aws.s3.delete_bucket_policy(Bucket=aws.work_bucket)
    invoke(s3_event(aws.media_bucket, "jobs/early.json"))
    assert [e["name"] for e in aws.executions()] == [job]


DENY_DELETES = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:DeleteObject",
            "Resource": "arn:aws:s3:::work/*",
        }
    ],
}


def test_a_facefusion_job_says_where_its_content_verdict_is_made_once(inputs: Aws) -> None:
    # GIVEN a FaceFusion job (whose engine declares content analysis job-level) and a built-in one
    aws = inputs
    job = put_manifest(aws, "jobs/ff.json", {**MANIFEST, "engine": "facefusion"})
    put_manifest(aws, "jobs/classic.json", {**MANIFEST, "engine": "classic"})
    # WHEN the slicer starts them
    invoke(*(s3_event(aws.media_bucket, f"jobs/{name}.json") for name in ("ff", "classic")))
    # THEN only the FaceFusion job's context names work/<job>/content-analysis.json, for every segment
    contexts = {
        payload["job"]["engine"]: payload["job"]
        for payload in (
            json.loads(aws.sfn.describe_execution(executionArn=execution["executionArn"])["input"])
            for execution in aws.executions()
        )
    }
    where = contexts["facefusion"]["content_analysis"]
    assert (where["bucket"], where["key"]) == (aws.work_bucket, layout.content_analysis_key(job))
    assert contexts["classic"]["content_analysis"] is None


def test_an_audio_source_is_probed_and_travels_with_the_job(inputs: Aws, tmp_path: Path) -> None:
    # GIVEN a lip sync job: a face image and a voice recording (named like nothing in particular) as sources
    aws = inputs
    voice = tmp_path / "voice"
    ffmpeg("-f", "lavfi", "-i", "sine=frequency=300:duration=4", "-c:a", "flac", "-f", "flac", str(voice))
    upload(aws, "inputs/voice", voice)
    manifest = {
        **MANIFEST, "engine": "facefusion", "source": ["inputs/face.jpg", "inputs/voice"],
        "options": {"processors": ["face_swapper", "lip_syncer"]},
    }  # fmt: skip
    put_manifest(aws, "jobs/lips.json", manifest)
    # WHEN the slicer starts it
    invoke(s3_event(aws.media_bucket, "jobs/lips.json"))
    # THEN the job's faces are the image, and its audio is the recording, sniffed and probed
    (execution,) = aws.executions()
    job = json.loads(aws.sfn.describe_execution(executionArn=execution["executionArn"])["input"])["job"]
    assert [source["key"] for source in job["sources"]] == ["inputs/face.jpg"]
    assert job["audio"]["file"]["key"] == "inputs/voice"
    assert job["audio"]["info"]["container"] == "flac" and job["audio"]["info"]["duration_s"] == pytest.approx(4.0)


def test_a_trimmed_job_at_another_rate_plans_only_its_range_and_encodes_at_its_rate(inputs: Aws) -> None:
    # GIVEN a job of frames 10..89 of a 100-frame, 25 fps clip, output at 30 fps
    aws = inputs
    options = {"trim_frame_start": 10, "trim_frame_end": 90, "output_video_fps": 30.0}
    job = put_manifest(aws, "jobs/trim.json", {**MANIFEST, "options": options})
    put_manifest(aws, "jobs/empty.json", {**MANIFEST, "options": {"trim_frame_start": 100}})
    # WHEN the slicer sees both
    invoke(*(s3_event(aws.media_bucket, f"jobs/{name}.json") for name in ("trim", "empty")))
    # THEN the first is planned over exactly its range, at the output's rate, with FaceFusion's frame repeats
    (execution,) = aws.executions()
    context = json.loads(aws.sfn.describe_execution(executionArn=execution["executionArn"])["input"])["job"]
    plan = json.loads(aws.s3.get_object(Bucket=aws.work_bucket, Key=layout.plan_key(job))["Body"].read())
    assert (plan[0]["start_frame"], plan[-1]["end_frame"], context["frame_count"]) == (10, 90, 80)
    assert (context["encoder"]["fps_num"], context["encoder"]["fps_den"]) == (30, 1)
    assert context["timeline"] == {"start": 10, "end": 90, "fps_num": 25, "fps_den": 1, "out_num": 30,
                                   "out_den": 1, "mode": "duplicate"}  # fmt: skip
    # AND the one whose trim leaves nothing is refused at once, saying so
    (notice,) = aws.notifications()
    assert "trim_frame_start 100 leave no frame of the target's 100 to render" in notice["reason"]


def test_a_job_is_cut_where_its_manifest_says(inputs: Aws) -> None:
    # GIVEN a 100-frame clip (the slicer alone would make one segment of it), one job asking for 4 segments,
    # one for cuts at frames 30 and 61, and one asking for more segments than its frames allow
    aws = inputs
    four = put_manifest(aws, "jobs/four.json", {**MANIFEST, "plan": {"segments": 4}})
    cuts = put_manifest(aws, "jobs/cuts.json", {**MANIFEST, "plan": {"cut_at": [30, 61]}})
    put_manifest(aws, "jobs/many.json", {**MANIFEST, "plan": {"segments": 60}})
    # WHEN the slicer sees them
    invoke(*(s3_event(aws.media_bucket, f"jobs/{name}.json") for name in ("four", "cuts", "many")))

    # THEN each plan is the one asked for
    def bounds(job: str) -> list[tuple[int, int]]:
        plan = json.loads(aws.s3.get_object(Bucket=aws.work_bucket, Key=layout.plan_key(job))["Body"].read())
        return [(item["start_frame"], item["end_frame"]) for item in plan]

    assert bounds(four) == [(0, 25), (25, 50), (50, 75), (75, 100)]
    assert bounds(cuts) == [(0, 30), (30, 61), (61, 100)]
    # AND the one that cannot be cut is refused at once, saying why
    (notice,) = aws.notifications()
    assert "plan.segments: 60 segments of at least 2 frames do not fit the job's 100 frames" in notice["reason"]


def test_a_job_with_faces_carries_each_persons_sources_and_reference(inputs: Aws) -> None:
    aws = inputs
    job = put_manifest(aws, "jobs/mapped.json", {**MAPPED, "engine": "classic"})
    assert invoke(s3_event(aws.media_bucket, "jobs/mapped.json")) == {"batchItemFailures": []}
    (execution,) = aws.executions()
    faces = json.loads(aws.sfn.describe_execution(executionArn=execution["executionArn"])["input"])["job"]["faces"]
    # THEN each person's sources index the job's, and the reference frame was decoded once, beside the job
    assert [face["sources"] for face in faces] == [[0], [1]]
    assert faces[0]["reference"]["key"] == "inputs/face.jpg" and faces[0]["frame"] is None
    assert faces[1]["frame"] == 0 and faces[1]["reference"]["key"] == layout.face_reference_key(job, 1)
    assert aws.s3.head_object(Bucket=aws.work_bucket, Key=faces[1]["reference"]["key"])["ContentLength"] > 0


def test_a_mappings_own_options_reach_its_pass(inputs: Aws) -> None:
    # GIVEN a job file's swap-then-enhance chain as a manifest: the second mapping with its step's own options
    aws = inputs
    own = {"processors": ["face_enhancer"], "face_enhancer_blend": 50}
    faces = [FACES[0], {**FACES[1], "options": own}]
    put_manifest(aws, "jobs/passes.json", {**MAPPED, "engine": "facefusion", "faces": faces})
    assert invoke(s3_event(aws.media_bucket, "jobs/passes.json")) == {"batchItemFailures": []}
    (execution,) = aws.executions()
    sent = json.loads(aws.sfn.describe_execution(executionArn=execution["executionArn"])["input"])["job"]["faces"]
    # THEN the segment message carries them with that person, and none with the other
    assert [face["options"] for face in sent] == [None, own]

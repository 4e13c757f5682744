"""The whole pipeline on LocalStack: S3 drop → slicer → priority SQS → 2 workers → Distributed Map → merge → SNS."""

from __future__ import annotations

import json
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from fleetctl.samples import grace_hopper_path, read_stamp
from fusionfleet import layout
from fusionfleet.adapters.orchestrator import execution_arn
from fusionfleet.jobs.ids import job_id
from tests.e2e.conftest import Stack
from tests.e2e.helpers import queues_empty, wait_until
from tests.support.media import decode_all, ffmpeg, write_video

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def ten_seconds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_video(
        tmp_path_factory.mktemp("e2e") / "ten.mp4", seconds=10, fps=25, width=320, height=240, with_stamp=True
    )


def s3_event_body(bucket: str, key: str, etag: str) -> str:
    """What S3 sends for a manifest upload; used to replay a duplicate delivery."""
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "s3_manifest_event.json"
    event = json.loads(fixture.read_text())
    event["Records"][0]["s3"]["bucket"]["name"] = bucket
    event["Records"][0]["s3"]["object"].update({"key": key, "eTag": etag})
    return json.dumps(event)


def test_s3_drop_renders_a_frame_exact_video_and_notifies_once(stack: Stack, ten_seconds: Path, tmp_path: Path) -> None:
    # GIVEN a face and a 10 s 25 fps clip with audio in the media bucket, and a notification subscriber
    s3 = stack.client("s3")
    bucket = stack.resources.media_bucket
    inbox = stack.subscribe()
    s3.upload_file(str(grace_hopper_path()), bucket, "inputs/e2e/face.jpg")
    s3.upload_file(str(ten_seconds), bucket, "inputs/e2e/ten seconds.mp4")
    manifest = {"version": 1, "source": ["inputs/e2e/face.jpg"], "target": "inputs/e2e/ten seconds.mp4",
                "engine": "copy", "priority": "high", "options": {"output_video_quality": 95}}  # fmt: skip
    body = json.dumps(manifest).encode()
    # WHEN the manifest is dropped into jobs/
    etag = s3.put_object(Bucket=bucket, Key="jobs/e2e drop.json", Body=body)["ETag"]
    job = job_id(bucket, "jobs/e2e drop.json", etag)
    # THEN a success notification arrives, naming the job and the output, under a subject SNS accepts
    (envelope,) = stack.envelopes(inbox, wait_s=240)
    notice = json.loads(envelope["Message"])
    assert notice["status"] == "succeeded", (notice, stack.logs())
    assert envelope["Subject"] == f"FusionFleet {job} done" and len(envelope["Subject"]) <= 100
    assert notice["job_id"] == job and notice["frames"] == 250
    assert notice["output"]["key"] == "outputs/e2e drop.mp4"
    assert set(notice["timings"]) >= {"submitted_at", "started_at", "finished_at", "render_s", "merge_s"}
    # AND it carries a before/after preview beside the output: 2 columns (target, output) × 4 rows of frames
    check_preview(notice["preview"], bucket, "outputs/e2e drop.preview.jpg", cell=(320, 240), rows=4)
    # AND the job's cost: engine and billed GPU-seconds, and their price at the local default
    check_cost(notice)
    # AND a SigV4 download link that states its end: 24 h, since the local stack's keys never end
    assert "X-Amz-Algorithm=AWS4-HMAC-SHA256" in notice["download_url"]
    expires = datetime.fromisoformat(notice["download_url_expires_at"].replace("Z", "+00:00"))
    assert timedelta(hours=23) < expires - datetime.now(UTC) <= timedelta(hours=24)
    with urllib.request.urlopen(notice["download_url"], timeout=30) as response:
        downloaded = response.read()
    output = tmp_path / "out.mp4"
    s3.download_file(bucket, notice["output"]["key"], str(output))
    assert downloaded == output.read_bytes()

    # AND the video has the source's frame count, duration within a frame, and the source's audio
    source_info, source_frames = decode_all(ten_seconds)
    info, frames = decode_all(output)
    assert len(frames) == info.frame_count == source_info.frame_count == 250
    assert abs(info.duration_s - source_info.duration_s) <= 1 / 25
    assert len(info.audio) == 1
    assert abs(info.audio[0].duration_s - source_info.audio[0].duration_s) <= 1 / 25
    # AND every output frame is the source frame of the same index, not a neighbour
    for index, image in enumerate(frames):
        assert read_stamp(image) == index
        error = [
            float(np.mean((image.astype(np.int16) - source_frames[j]) ** 2))
            for j in (index - 1, index, index + 1)
            if 0 <= j < 250
        ]
        own = float(np.mean((image.astype(np.int16) - source_frames[index]) ** 2))
        assert own == min(error), f"frame {index} matches a neighbour better than itself"

    # WHEN the same manifest event is delivered again and the same manifest is uploaded again
    stack.client("sqs").send_message(
        QueueUrl=stack.resources.ingest_queue_url, MessageBody=s3_event_body(bucket, "jobs/e2e+drop.json", etag)
    )
    assert s3.put_object(Bucket=bucket, Key="jobs/e2e drop.json", Body=body)["ETag"] == etag
    # (the slicer logs each manifest event it handled: the first, the replay and the re-upload)
    assert wait_until(lambda: handled(stack, job) >= 3, 120), stack.logs()
    assert wait_until(lambda: queues_empty(stack), 60)
    # THEN there is still one job and one notification
    sfn = stack.client("stepfunctions")
    executions = [
        e
        for e in sfn.list_executions(stateMachineArn=stack.resources.state_machine_arn)["executions"]
        if e["name"] == job
    ]
    assert len(executions) == 1
    assert stack.notifications(inbox, wait_s=5) == []
    # AND nothing is left in any queue, and the manifest is still where the user put it
    assert queues_empty(stack)
    s3.head_object(Bucket=bucket, Key="jobs/e2e drop.json")
    # AND each planned segment was rendered once, to its deterministic key
    listing = s3.list_objects_v2(Bucket=stack.resources.work_bucket, Prefix=layout.work_prefix(job) + "segments/")
    segments = sorted(item["Key"] for item in listing["Contents"] if item["Key"].endswith(".mp4"))
    assert segments == [layout.segment_key(job, i) for i in range(2)]


def handled(stack: Stack, job: str) -> int:
    """How many manifest events of `job` the slicer has handled (its log has a line for each)."""
    log = stack.worker_log("slicer")
    return sum(1 for line in log.splitlines() if "manifest handled" in line and job in line)


def check_preview(preview: dict[str, Any], bucket: str, key: str, cell: tuple[int, int], rows: int) -> None:
    assert (preview["bucket"], preview["key"]) == (bucket, key)
    with urllib.request.urlopen(preview["url"], timeout=30) as response:
        data = response.read()
        assert response.headers["Content-Type"] == "image/jpeg"
    sheet = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    assert data[:3] == b"\xff\xd8\xff" and sheet is not None, "the preview is not a JPEG"
    width, height = 2 * cell[0], rows * cell[1]
    assert sheet.shape == (height, width, 3) and (preview["width"], preview["height"]) == (width, height)
    assert len(preview["frames"]) == rows and preview["frames"] == sorted(preview["frames"])


def check_cost(notice: dict[str, Any]) -> None:
    cost = notice["cost"]
    assert 0 <= cost["engine_gpu_s"] <= cost["billed_gpu_s"] and cost["billed_gpu_s"] > 0, cost
    # the billed time is the workers' time the timings report (each render to its upload) and what each
    # attempt does beyond it (its winner check and the engine process's set-up before, its commit,
    # checkpoint cleanup and callback after: under a second each), and the estimate prices it
    worker_s = notice["timings"]["worker_s"]
    beyond_s = 1.0 * cost["attempts"]
    assert worker_s - 0.01 <= cost["billed_gpu_s"] <= worker_s + beyond_s, (cost, notice["timings"])
    assert cost["gpu_hourly_price"] == pytest.approx(1.006)
    assert cost["estimated_usd"] == pytest.approx(cost["billed_gpu_s"] / 3600 * 1.006, rel=1e-3, abs=1e-6)


def test_submit_wait_downloads_the_result_and_prints_the_job_id(stack: Stack, tmp_path: Path) -> None:
    clip = write_video(tmp_path / "short clip.mp4", seconds=4, fps=25, width=320, height=240)
    destination = tmp_path / "result.mp4"
    result = stack.cli(
        "submit", "--source", str(grace_hopper_path()), "--target", str(clip), "--engine", "copy",
        "--priority", "low", "--wait", "--output", str(destination), "--output-video-quality", "90",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr + stack.logs()
    job = result.stdout.strip().splitlines()[-1]
    assert job.startswith("short-clip-")
    assert "segments" in result.stderr and "succeeded: 100 frames" in result.stderr
    info, frames = decode_all(destination)
    assert len(frames) == 100 and len(info.audio) == 1
    status = stack.cli("status", job)
    assert status.returncode == 0
    assert "SUCCEEDED" in status.stdout and "1 done, 0 failed" in status.stdout and "outputs/" in status.stdout


def test_a_target_that_is_not_a_video_fails_promptly_and_loses_nothing(stack: Stack, tmp_path: Path) -> None:
    inbox = stack.subscribe()
    fake = tmp_path / "holiday.mp4"
    fake.write_text("this is a shopping list, not a video\n")
    result = stack.cli(
        "submit", "--source", str(grace_hopper_path()), "--target", str(fake), "--wait", "--name", "not-a-video",
        timeout=300,
    )  # fmt: skip
    # THEN the CLI ends by itself (told by the slicer's failure notice, not by a cap), non-zero, with the reason
    assert result.returncode == 3, result.stderr  # rejected
    assert "is neither a video in an accepted container" in result.stderr and "it is a text file" in result.stderr
    # AND the notification says the same, the manifest and media are in place, no queue holds anything
    (notice,) = stack.notifications(inbox, wait_s=30)
    assert notice["status"] == "failed" and "it is a text file" in notice["reason"]
    s3 = stack.client("s3")
    s3.head_object(Bucket=stack.resources.media_bucket, Key="jobs/not-a-video.json")
    s3.head_object(Bucket=stack.resources.media_bucket, Key="inputs/not-a-video/target.mp4")
    assert wait_until(lambda: queues_empty(stack), 20)
    arn = execution_arn(stack.resources.state_machine_arn, result.stdout.strip().splitlines()[-1])
    sfn = stack.client("stepfunctions")
    with pytest.raises(sfn.exceptions.ExecutionDoesNotExist):
        sfn.describe_execution(executionArn=arn)


def test_local_status_lists_every_process_and_up_is_idempotent(stack: Stack) -> None:
    status = stack.cli("local", "status", "--state-dir", str(stack.state_dir))
    assert status.returncode == 0
    for role in ("localstack", "slicer", "watchdog", "dlq", "merge", "worker", "dashboard", "api"):
        assert role in status.stdout
    # LocalStack, the slicer, the watchdog, two dead-letter runners, the two job-events runners (webhook
    # deliveries, notices followed), the merge worker, two render workers, the dashboard and the HTTP API;
    # then the render workers' current and desired counts.
    assert status.stdout.count("running") == 12 and "render-high" in status.stdout and "dlq-render" in status.stdout
    assert "render workers: 2 current, 2 desired (fixed)" in status.stdout
    before = status.stdout
    port = stack.endpoint.rsplit(":", 1)[1]
    again = stack.cli(
        "local", "up", "--workers", "2", "--port", port, "--default-engine", "copy", "--state-dir", str(stack.state_dir)
    )
    assert again.returncode == 0, again.stderr
    assert "already running" in again.stderr
    after = stack.cli("local", "status", "--state-dir", str(stack.state_dir)).stdout
    assert process_pids(before) == process_pids(after)


def process_pids(status: str) -> list[str]:
    roles = {"localstack", "slicer", "watchdog", "dlq", "merge", "worker", "dashboard", "api"}
    # Rows of the process table only (ROLE NAME PID STATE); `dashboard <url>` is a line of its own.
    rows = [line.split() for line in status.splitlines()]
    return sorted(row[2] for row in rows if len(row) == 4 and row[0] in roles and row[3] in ("running", "dead"))


ASL = Path(__file__).resolve().parents[2] / "infra" / "statemachine" / "render.asl.json"


def test_a_merge_that_times_out_without_a_cause_still_ends_in_a_failure_notice(stack: Stack) -> None:
    # GIVEN the real definition deployed as a machine of its own whose queues nobody reads, so the merge
    # can only time out (States.Timeout: an Error and, on some engines, no Cause), and a topic to read
    sqs, sns, sfn = stack.client("sqs"), stack.client("sns"), stack.client("stepfunctions")
    suffix = str(time.monotonic_ns())
    urls = {name: sqs.create_queue(QueueName=f"catch-{name}-{suffix}")["QueueUrl"] for name in ("high", "normal",
            "low", "merge")}  # fmt: skip
    topic = sns.create_topic(Name=f"catch-{suffix}")["TopicArn"]
    inbox = sqs.create_queue(QueueName=f"catch-inbox-{suffix}")["QueueUrl"]
    inbox_arn = sqs.get_queue_attributes(QueueUrl=inbox, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=inbox_arn)
    definition = ASL.read_text()
    for name, value in {"RenderQueueHighUrl": urls["high"], "RenderQueueNormalUrl": urls["normal"],
                        "RenderQueueLowUrl": urls["low"], "MergeQueueUrl": urls["merge"],
                        "NotificationTopicArn": topic, "WorkBucket": stack.resources.work_bucket}.items():  # fmt: skip
        definition = definition.replace("${" + name + "}", value)
    machine = sfn.create_state_machine(
        name=f"catch-{suffix}", definition=definition, roleArn="arn:aws:iam::000000000000:role/catch"
    )["stateMachineArn"]
    plan_key = f"work/catch-{suffix}/plan.json"
    stack.client("s3").put_object(Bucket=stack.resources.work_bucket, Key=plan_key, Body=b"[]")
    job = {"job_id": f"catch-{suffix}", "manifest": "jobs/catch.json"}
    limits = {"render_timeout_s": 5, "render_heartbeat_s": 5, "merge_timeout_s": 3, "merge_heartbeat_s": 3,
              "render_concurrency": 1}  # fmt: skip
    # (without `final_notice`, as a slicer older than it starts one: the machine gives it one itself)
    execution_input = {"job": job, "plan": {"bucket": stack.resources.work_bucket, "key": plan_key},
                       "limits": limits, "tenant": "-"}  # fmt: skip
    # WHEN a job runs on it
    arn = sfn.start_execution(stateMachineArn=machine, input=json.dumps(execution_input))["executionArn"]
    assert wait_until(lambda: sfn.describe_execution(executionArn=arn)["status"] != "RUNNING", timeout_s=120)
    # THEN it fails as a job the state machine told about, with a cause that names the error
    described = sfn.describe_execution(executionArn=arn)
    history = [
        {k: v for k, v in event.items() if k.endswith("Details") or k == "type"}
        for event in sfn.get_execution_history(executionArn=arn)["events"]
    ]
    assert (described["status"], described.get("error")) == ("FAILED", "JobFailed"), json.dumps(history, default=str)
    assert described.get("cause"), json.dumps(history, default=str)
    # AND the failure notice was published, naming the job, the error and a reason
    notices: list[dict[str, Any]] = []
    deadline = time.monotonic() + 30
    while not notices and time.monotonic() < deadline:
        for message in sqs.receive_message(QueueUrl=inbox, WaitTimeSeconds=1).get("Messages", []):
            notices.append(json.loads(json.loads(message["Body"])["Message"]))
    (notice,) = notices
    assert (notice["status"], notice["job_id"], notice["error"]) == ("failed", job["job_id"], "States.Timeout")
    assert notice["reason"]


def test_a_trimmed_job_at_another_rate_with_an_audio_source_renders_frame_exact(
    stack: Stack, ten_seconds: Path, tmp_path: Path
) -> None:
    # GIVEN frames 30..219 of the stamped 10 s, 25 fps clip wanted at 30 fps, with a 300 Hz voice as a source
    s3, bucket = stack.client("s3"), stack.resources.media_bucket
    inbox = stack.subscribe()
    voice = tmp_path / "voice.flac"
    ffmpeg("-f", "lavfi", "-i", "sine=frequency=300:duration=12", "-c:a", "flac", str(voice))
    s3.upload_file(str(grace_hopper_path()), bucket, "inputs/trim/face.jpg")
    s3.upload_file(str(voice), bucket, "inputs/trim/voice.flac")
    s3.upload_file(str(ten_seconds), bucket, "inputs/trim/ten.mp4")
    options = {"trim_frame_start": 30, "trim_frame_end": 220, "output_video_fps": 30.0}
    manifest = {"version": 1, "source": ["inputs/trim/face.jpg", "inputs/trim/voice.flac"],
                "target": "inputs/trim/ten.mp4", "engine": "copy", "priority": "high", "options": options}  # fmt: skip
    etag = s3.put_object(Bucket=bucket, Key="jobs/trim.json", Body=json.dumps(manifest).encode())["ETag"]
    job = job_id(bucket, "jobs/trim.json", etag)
    # WHEN the local stack renders it
    (envelope,) = stack.envelopes(inbox, wait_s=240)
    notice = json.loads(envelope["Message"])
    assert notice["status"] == "succeeded" and notice["job_id"] == job, (notice, stack.logs())
    output = tmp_path / "out.mp4"
    s3.download_file(bucket, notice["output"]["key"], str(output))
    # THEN every output frame is the target frame FaceFusion's writer shows there (190 frames at 25 fps
    # repeated to 228 at 30 fps: every fifth one twice), in several segments
    info, frames = decode_all(output)
    expected = [frame for frame in range(30, 220) for _ in range(2 if (frame - 30) % 5 == 2 else 1)]
    assert len(expected) == 228 and [read_stamp(image) for image in frames] == expected
    assert info.fps == 30 and abs(info.duration_s - 7.6) < 1 / 30
    plan = json.loads(s3.get_object(Bucket=stack.resources.work_bucket, Key=layout.plan_key(job))["Body"].read())
    assert len(plan) >= 2 and (plan[0]["start_frame"], plan[-1]["end_frame"]) == (30, 220)
    # AND its one audio track is the voice, cut to the video's length
    assert len(info.audio) == 1 and abs(info.audio[0].duration_s - 7.6) <= 0.05

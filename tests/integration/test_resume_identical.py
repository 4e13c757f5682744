"""A segment interrupted mid-way and resumed from its checkpoint equals an undisturbed render, byte for byte."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from fusionfleet import layout
from fusionfleet.messages import JobContext
from tests.integration.conftest import Aws
from tests.integration.test_worker_loop import job, plan, record_of, recorder, render_worker

__all__ = ["job"]

pytestmark = pytest.mark.timeout(600)


def _render(aws: Aws, context: JobContext, segment: dict[str, Any], workdir: Path, faults: list[object]) -> bytes:
    workdir.mkdir()
    faults_file = workdir / "faults.json"
    faults_file.write_text(json.dumps(faults))
    body = {"task_token": "t", "job": context.model_dump(mode="json"), "segment": segment}
    aws.sqs.send_message(QueueUrl=aws.queues["RenderQueueHigh"], MessageBody=json.dumps(body))
    # A fresh worker (own engine) per attempt: as after a kill, nothing survives in memory.
    for _ in range(1 + len(faults)):
        render_worker(aws, workdir, recorder(aws), faults_file=faults_file).run(max_tasks=1)
    key = str(record_of(aws, context, int(segment["index"]))["key"])
    return bytes(aws.s3.get_object(Bucket=aws.work_bucket, Key=key)["Body"].read())


@pytest.mark.parametrize("engine", ["copy", "classic"])
def test_a_resumed_segment_equals_an_undisturbed_render_byte_for_byte(
    aws: Aws, job: JobContext, tmp_path: Path, engine: str
) -> None:
    # GIVEN a 50-frame segment of a moving face cut into two 25-frame chunks, rendered undisturbed
    segment = plan(aws, job)[1]
    settings = dataclasses.replace(job.encoder, chunk_frames=25, keyint=25)
    calm = job.model_copy(update={"encoder": settings, "engine": engine, "job_id": f"{job.job_id}-calm"})
    undisturbed = _render(aws, calm, segment, tmp_path / "calm", [])
    # WHEN the same segment of another job is interrupted at frame 30 (after its first chunk was
    # saved) and a new worker resumes it
    hit = job.model_copy(update={"encoder": settings, "engine": engine, "job_id": f"{job.job_id}-hit"})
    fault = {"job": hit.job_id, "segment": 1, "attempt": 1, "action": "fail", "at_frame": 30}
    resumed = _render(aws, hit, segment, tmp_path / "hit", [fault])
    # THEN it did resume after the saved chunk, from the engine's saved state
    record = record_of(aws, hit, 1)
    assert record["attempt"] == 2 and record["resumed_from"] == segment["start_frame"] + 25
    # AND its output equals the undisturbed render byte for byte
    assert resumed == undisturbed
    # AND nothing of the checkpoint (chunks or state) is left
    listed = aws.s3.list_objects_v2(Bucket=aws.work_bucket, Prefix=layout.checkpoint_prefix(hit.job_id, 1))
    assert listed.get("KeyCount") == 0

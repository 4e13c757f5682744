"""The task results sent to Step Functions keep the JSON shape the state machine and the clients read."""

from __future__ import annotations

import json
import re

from fusionfleet.messages import JobCost, MergeResult, MergeTimings, OutputLocation, Preview, SegmentResult
from tests.support.template import ROOT

MERGE = MergeResult(
    output=OutputLocation(bucket="media", key="outputs/clip.mp4", uri="s3://media/outputs/clip.mp4"),
    download_url="https://media.fake/outputs/clip.mp4",
    download_url_expires_at="2026-12-04T12:00:00Z",
    frames=100,
    duration_s=4.0,
    audio_tracks=1,
    timings=MergeTimings(render_s=3.25, worker_s=6.5, engine_s=4.125, merge_s=0.75, merge_started_at=1700000000.5),
    cost=JobCost(engine_gpu_s=4.125, billed_gpu_s=6.5, gpu_hourly_price=1.2, estimated_usd=0.002167),
    preview=Preview(
        bucket="media",
        key="outputs/clip.preview.jpg",
        url="https://media.fake/outputs/clip.preview.jpg",
        url_expires_at="2026-12-04T12:00:00Z",
        width=640,
        height=960,
        frames=(12, 37, 62, 87),
    ),
)


def test_a_segment_result_is_a_flat_json_object() -> None:
    result = SegmentResult(index=3, key="work/j/segments/00003.mp4", frames=50, engine_s=1.25)
    assert result.model_dump(mode="json") == {
        "index": 3,
        "key": "work/j/segments/00003.mp4",
        "frames": 50,
        "engine_s": 1.25,
        "copy_number": 0,  # which copy's output was committed (1: a straggler's backup copy)
    }


def test_a_merge_result_has_the_shape_the_state_machine_reads() -> None:
    assert MERGE.model_dump(mode="json") == {
        "output": {"bucket": "media", "key": "outputs/clip.mp4", "uri": "s3://media/outputs/clip.mp4"},
        "download_url": "https://media.fake/outputs/clip.mp4",
        "download_url_expires_at": "2026-12-04T12:00:00Z",
        "frames": 100,
        "duration_s": 4.0,
        "audio_tracks": 1,
        "timings": {
            "render_s": 3.25,
            "worker_s": 6.5,
            "engine_s": 4.125,
            "merge_s": 0.75,
            "merge_started_at": 1700000000.5,
        },
        "cost": {
            "engine_gpu_s": 4.125,
            "billed_gpu_s": 6.5,
            "gpu_hourly_price": 1.2,
            "estimated_usd": 0.002167,
            "attempts": 0,
            "wasted_usd": 0.0,
            "usd_by_capacity": {},
        },
        "preview": {
            "bucket": "media",
            "key": "outputs/clip.preview.jpg",
            "url": "https://media.fake/outputs/clip.preview.jpg",
            "url_expires_at": "2026-12-04T12:00:00Z",
            "width": 640,
            "height": 960,
            "frames": [12, 37, 62, 87],
        },
    }
    assert MergeResult.model_validate_json(MERGE.model_dump_json()) == MERGE


def test_every_merge_path_in_the_state_machine_exists_in_the_result() -> None:
    definition = (ROOT / "infra" / "statemachine" / "render.asl.json").read_text()
    paths = set(re.findall(r'"\$\.merge\.([A-Za-z_.]+)"', definition))
    assert paths, "the state machine reads the merge result"
    dumped = json.loads(MERGE.model_dump_json())
    for path in sorted(paths):
        value = dumped
        for part in path.split("."):
            assert isinstance(value, dict) and part in value, f"$.merge.{path} is not in the merge result"
            value = value[part]


def test_a_merge_result_without_a_preview_still_has_the_field_the_state_machine_reads() -> None:
    # GIVEN a merge whose preview could not be made
    result = MERGE.model_copy(update={"preview": None})
    # WHEN it is sent to Step Functions
    dumped = json.loads(result.model_dump_json())
    # THEN `$.merge.preview` resolves (to null) rather than failing the SuccessNotice state
    assert "preview" in dumped and dumped["preview"] is None

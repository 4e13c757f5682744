"""`fusionfleet try`: its frames, its target, the manifest it submits, and the API's link per frame."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from fleetctl.client import Client
from fleetctl.samples import grace_hopper_path
from fleetctl.try_commands import check_target, parse_frames, picture_name
from fusionfleet import layout
from fusionfleet.errors import FusionFleetError
from fusionfleet.jobs.ids import job_id as pipeline_job_id
from fusionfleet.jobs.manifest import MAX_TRY_FRAMES, parse_manifest
from fusionfleet.messages import ObjectRef
from tests.support.fakes import FakeOrchestrator, FakeStorage
from tests.support.farm import RESOURCES
from tests.support.jobs import MEDIA
from tests.unit.test_api_jobs import JPEG_HEAD, Farm


def test_frames_are_whole_numbers_from_zero_each_once_in_the_order_given() -> None:
    assert parse_frames("0,120, 240") == (0, 120, 240)
    assert parse_frames("240,0") == (240, 0)
    for text, why in (
        ("", "at least one frame"), ("0,ten", "'ten' not a frame number"), ("-1", "'-1' not a frame number"),
        ("1.5", "'1.5' not a frame number"), ("3,3", "each frame once"),
        (",".join(map(str, range(MAX_TRY_FRAMES + 1))), f"at most {MAX_TRY_FRAMES} frames"),
    ):  # fmt: skip
        with pytest.raises(argparse.ArgumentTypeError, match=why):
            parse_frames(text)


def test_a_picture_is_named_by_its_frame_as_the_farm_names_it() -> None:
    assert picture_name(120) == "frame-000120.png"
    assert layout.trial_frame_key("outputs/clip/", 120) == "outputs/clip/frame-000120.png"


def test_an_image_target_is_told_before_any_upload(tmp_path: Path) -> None:
    with pytest.raises(FusionFleetError, match="is a jpeg image: a test render renders frames of a video"):
        check_target(grace_hopper_path())
    with pytest.raises(FusionFleetError, match="is not a file"):
        check_target(tmp_path / "missing.mp4")
    video = tmp_path / "clip.mp4"
    video.write_bytes(b"\x00\x00\x00\x18ftypisom" + bytes(64))
    check_target(video)  # a video's bytes: taken (the slicer probes it)


def test_the_submitted_manifest_asks_for_the_frames_under_an_output_prefix(tmp_path: Path) -> None:
    target = tmp_path / "clip.mp4"
    target.write_bytes(b"\x00\x00\x00\x18ftypisom" + bytes(64))
    storage = FakeStorage()
    client = Client(storage, FakeOrchestrator(), RESOURCES)
    submission = client.submit([grace_hopper_path()], target, "high", "classic", name="clip-try", frames=(0, 120))
    raw = storage.get_bytes("media", submission.manifest_key)
    manifest = json.loads(raw)
    assert manifest["frames"] == [0, 120] and manifest["output"] == "outputs/clip-try/"
    assert submission.output_key == "outputs/clip-try/"
    parsed = parse_manifest(raw, submission.manifest_key)  # as the slicer reads it
    assert parsed.is_try and parsed.frames == (0, 120)


def test_a_succeeded_test_render_has_a_link_per_frame_through_the_api() -> None:
    farm = Farm()
    created = farm.call("POST", "/jobs", {"source": "face.jpg", "target": "clip.mp4", "frames": [240, 0]}).body
    for upload in created["uploads"]:
        farm.storage.put_bytes(MEDIA, upload["key"], JPEG_HEAD if upload["name"] == "face.jpg" else b"media")
    api_id = created["job_id"]
    assert farm.call("POST", f"/jobs/{api_id}/start").status == 202
    key = layout.tenant_manifest_key("acme", api_id)
    manifest = json.loads(farm.storage.get_bytes(MEDIA, key))
    prefix = f"tenants/acme/outputs/{api_id}/"
    assert manifest["frames"] == [240, 0] and manifest.get("output", prefix) == prefix
    job = pipeline_job_id(MEDIA, key, farm.storage.head(MEDIA, key).etag)
    farm.sliced(job, "RUNNING", done=1)
    assert "frames" not in farm.call("GET", f"/jobs/{api_id}").body  # none before it succeeded
    farm.sliced(job, "SUCCEEDED", done=4)
    _output(farm, job, prefix)
    view = farm.call("GET", f"/jobs/{api_id}").body
    assert view["state"] == "SUCCEEDED" and "download_url" not in view
    assert view["frames"] == [
        {"frame": 240, "download_url": f"https://{MEDIA}.fake/{prefix}frame-000240.png?expires=900"},
        {"frame": 0, "download_url": f"https://{MEDIA}.fake/{prefix}frame-000000.png?expires=900"},
    ]


def test_a_poster_strips_links_are_for_the_frames_the_slicer_chose() -> None:
    # GIVEN a test render that asks for 3 frames spread over its target, its frames not named
    farm = Farm()
    body = {"source": "face.jpg", "target": "clip.mp4", "spread_frames": 3, "engine": "copy"}
    created = farm.call("POST", "/jobs", body).body
    for upload in created["uploads"]:
        farm.storage.put_bytes(MEDIA, upload["key"], JPEG_HEAD if upload["name"] == "face.jpg" else b"media")
    api_id = created["job_id"]
    assert farm.call("POST", f"/jobs/{api_id}/start").status == 202
    key = layout.tenant_manifest_key("acme", api_id)
    job = pipeline_job_id(MEDIA, key, farm.storage.head(MEDIA, key).etag)
    prefix = f"tenants/acme/outputs/{api_id}/"
    # WHEN the slicer chose frames 0, 14 and 29 of the 30-frame clip and the render succeeded
    farm.sliced(job, "SUCCEEDED", done=3)
    _output(farm, job, prefix, trial_frames=[0, 14, 29])
    # THEN its view links a picture of each of those frames
    view = farm.call("GET", f"/jobs/{api_id}").body
    assert [(picture["frame"], picture["download_url"]) for picture in view["frames"]] == [
        (frame, f"https://{MEDIA}.fake/{prefix}frame-{frame:06d}.png?expires=900") for frame in (0, 14, 29)
    ]


def _output(farm: Farm, job: str, prefix: str, trial_frames: list[int] | None = None) -> None:
    """The slicer's job record as it is for a test render: its output is the job's prefix."""
    record = json.loads(farm.storage.get_bytes("work", layout.job_key(job)))
    record["output"] = ObjectRef(bucket=MEDIA, key=prefix).model_dump(mode="json")
    if trial_frames is not None:
        record["trial_frames"] = trial_frames
    farm.storage.put_json("work", layout.job_key(job), record)

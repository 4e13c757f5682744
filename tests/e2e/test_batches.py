"""Image targets and batches on the local stack, over HTTP: the state machine, the slicer's batch window,
the items' tells and the one summary notice, checked on the outputs themselves."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from fleetctl.samples import astronaut, grace_hopper_path, read_stamp
from fusionfleet import batch_layout
from fusionfleet.jobs.ids import batch_id, job_id
from fusionfleet.jobs.image_output import image_format_of_key
from fusionfleet.media.image import check_image
from fusionfleet.media.limits import MediaLimits
from tests.e2e.conftest import Stack
from tests.e2e.helpers import api_call, api_token, api_url, notice_for, post_file, wait_until
from tests.support.browser import dump_dom, elements
from tests.support.media import decode_all, write_video

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def media(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("batch-inputs")
    picture = cv2.resize(astronaut(), (240, 180), interpolation=cv2.INTER_AREA)
    for index, extension in enumerate((".jpg", ".png", ".webp", ".bmp")):
        shifted = np.roll(picture, index * 7, axis=1)  # four different pictures
        assert cv2.imwrite(str(folder / f"photo-{index}{extension}"), shifted)
    write_video(folder / "clip-0.mp4", seconds=2, fps=25, width=160, height=120, with_stamp=True)
    write_video(folder / "clip-1.mp4", seconds=3, fps=25, width=160, height=120, with_stamp=True)
    return folder


def upload(stack: Stack, folder: Path, prefix: str) -> list[str]:
    s3 = stack.client("s3")
    bucket = stack.resources.media_bucket
    s3.upload_file(str(grace_hopper_path()), bucket, f"{prefix}face.jpg")
    keys = []
    for path in sorted(folder.iterdir()):
        s3.upload_file(str(path), bucket, f"{prefix}targets/{path.name}")
        keys.append(f"{prefix}targets/{path.name}")
    return keys


def drop(stack: Stack, name: str, manifest: dict[str, Any]) -> str:
    bucket = stack.resources.media_bucket
    body = json.dumps({"version": 1, "engine": "copy", **manifest}).encode()
    return str(stack.client("s3").put_object(Bucket=bucket, Key=f"jobs/{name}.json", Body=body)["ETag"])


def fetch(stack: Stack, key: str) -> bytes:
    return bytes(stack.client("s3").get_object(Bucket=stack.resources.media_bucket, Key=key)["Body"].read())


def test_an_image_target_runs_as_a_one_segment_job(stack: Stack, media: Path, tmp_path: Path) -> None:
    keys = upload(stack, media, "inputs/single-image/")
    inbox = stack.subscribe()
    (png,) = [key for key in keys if key.endswith(".png")]
    etag = drop(stack, "single-image", {"source": "inputs/single-image/face.jpg", "target": png,
                                        "options": {"output_image_scale": 0.5}})  # fmt: skip
    job = job_id(stack.resources.media_bucket, "jobs/single-image.json", etag)
    notice = notice_for(stack, inbox, job, wait_s=180)
    assert notice["status"] == "succeeded", notice
    # THEN the output keeps the target's format (PNG), at half its size, beside the drop
    assert notice["output"]["key"] == "outputs/single-image.png" and notice["frames"] == 1
    info = check_image(fetch(stack, "outputs/single-image.png"), "output", MediaLimits())
    assert (info.format, info.width, info.height) == ("png", 120, 90)


def test_a_batch_of_images_and_clips_gives_each_items_output_and_one_summary(
    stack: Stack, media: Path, browser: str
) -> None:
    # GIVEN four images and two clips, and a batch naming them by prefix, with a window of two items
    keys = upload(stack, media, "inputs/mixed/")
    inbox = stack.subscribe()
    etag = drop(stack, "mixed", {"source": "inputs/mixed/face.jpg", "targets": ["inputs/mixed/targets/"],
                                 "priority": "high"})  # fmt: skip
    batch = batch_id(stack.resources.media_bucket, "jobs/mixed.json", etag)
    # WHEN it runs
    summary = notice_for(stack, inbox, batch, wait_s=600)
    # THEN one summary says every item succeeded and where each output is
    assert summary["status"] == "succeeded" and summary["stage"] == "batch", summary
    assert summary["items"] == {"total": 6, "succeeded": 6, "unsuccessful": 0}
    results = {r["target"]: r for r in summary["results"]}
    assert set(results) == set(keys)  # the face (beside the folder, not under the prefix) is no item
    # AND no item sent a notice of its own: only the summary came
    time.sleep(5)
    others = [n for n in stack.notifications(inbox, wait_s=3, count=10) if str(n.get("job_id", "")).startswith(batch)]
    assert others == []
    # AND each image kept its format and each clip is its frames, under the batch's prefix
    for target, result in results.items():
        name = target.rsplit("/", 1)[-1]
        stem, extension = name.rsplit(".", 1)
        expected = (
            f"s3://{stack.resources.media_bucket}/outputs/mixed/{stem}.{'mp4' if extension == 'mp4' else extension}"
        )
        assert result["output"] == expected and result["state"] == "SUCCEEDED"
    for name in sorted(path.name for path in media.iterdir()):
        stem, extension = name.rsplit(".", 1)
        check_output(
            _download(stack, f"outputs/mixed/{stem}.{extension}", media.parent / f"mixed-{name}"), media / name
        )
    # AND the batch's record is closed: no tick keeps it open
    assert wait_until(lambda: not _exists(stack, batch_layout.open_batch_key(batch)), 30)
    # AND the operator's dashboard (a real browser) lists the batch as one row, which opens into its items
    shown = elements(dump_dom(f"{stack.state().dashboard_url}?job={batch}"))
    listed = {
        e.attrs["data-job-id"]: e.attrs.get("data-kind") for e in shown if e.tag == "tr" and "data-job-id" in e.attrs
    }
    assert listed.get(batch) == "batch" and not [job for job in listed if job.startswith(f"{batch}.")], listed
    items = [
        (e.attrs["data-item"], e.attrs["data-item-state"]) for e in shown if e.tag == "tr" and "data-item" in e.attrs
    ]
    assert items == [(str(index), "SUCCEEDED") for index in range(6)], items


def check_output(output: Path, target: Path) -> None:
    """The copy engine's output of `target`: a clip with every frame (and its audio), an image in its format
    and size whose pixels are the target's (within the re-encoding of a lossy format)."""
    if target.suffix == ".mp4":
        info, frames = decode_all(output)
        _, expected = decode_all(target)
        assert (len(frames), info.width, info.height, len(info.audio)) == (len(expected), 160, 120, 1), output
        assert [read_stamp(frame) for frame in frames] == list(range(len(expected))), f"{output}: frames out of order"
        return
    image = check_image(output.read_bytes(), "output", MediaLimits())
    assert (image.format, image.width, image.height) == (image_format_of_key(target.name), 240, 180), output
    got, want = cv2.imread(str(output)), cv2.imread(str(target))
    assert got is not None and want is not None
    # A lossy format is encoded again (quality 80: ~34 dB here); the neighbouring picture is ~12 dB away.
    floor = 30.0 if image.format in ("jpeg", "webp") else 45.0
    assert cv2.PSNR(got, want) > floor, f"{output}: not the target's pixels ({cv2.PSNR(got, want):.1f} dB)"


def test_the_cli_submits_a_glob_and_a_file_as_a_batch_and_fetches_each_output(
    stack: Stack, media: Path, tmp_path: Path
) -> None:
    # GIVEN the images by a quoted glob and one clip by name, and a notice inbox
    inbox = stack.subscribe()
    out = tmp_path / "out"
    # WHEN the CLI submits them as one batch and waits
    result = stack.cli(
        "submit", "--source", str(grace_hopper_path()), "--target", str(media / "photo-*"),
        "--target", str(media / "clip-0.mp4"), "--engine", "copy", "--name", "cli-batch", "--wait",
        "--output-dir", str(out), "--timeout", "600",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    batch = result.stdout.strip().splitlines()[-1]
    # THEN every item's output is in the folder, each the target's own
    named = sorted(path.name for path in media.iterdir() if path.name != "clip-1.mp4")
    assert sorted(path.name for path in out.iterdir()) == named, result.stderr
    for name in named:
        check_output(out / name, media / name)
    # AND exactly one notice came for the whole batch: its summary
    notices = [n for n in stack.notifications(inbox, wait_s=10, count=20) if str(n.get("job_id", "")).startswith(batch)]
    assert [(n["job_id"], n["stage"], n["status"]) for n in notices] == [(batch, "batch", "succeeded")]
    assert notices[0]["items"] == {"total": 5, "succeeded": 5, "unsuccessful": 0}
    # AND `status` takes the batch's id and lists its items; `retry` and `cancel` refuse an ended batch
    status = stack.cli("status", batch)
    assert status.returncode == 0, status.stderr
    assert "SUCCEEDED" in status.stdout and all(f"{batch}.{i:04d}" in status.stdout for i in range(5)), status.stdout
    for action in ("retry", "cancel"):
        refused = stack.cli(action, batch)
        assert refused.returncode != 0 and f"batch {batch}" in refused.stderr, (action, refused.stderr)


def test_the_cli_cancels_a_running_batch_and_retries_it_to_one_summary_each_time(
    stack: Stack, media: Path, tmp_path: Path
) -> None:
    # GIVEN a batch of an image and two clips whose items each sleep in the engine
    stack.set_faults([{"job": "steered", "action": "slow", "at_frame": 0, "seconds": 30}])
    inbox = stack.subscribe()
    targets = [media / "photo-1.png", media / "clip-0.mp4", media / "clip-1.mp4"]
    result = stack.cli(
        "submit", "--source", str(grace_hopper_path()), *[arg for path in targets for arg in ("--target", str(path))],
        "--engine", "copy", "--name", "steered",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    batch = result.stdout.strip().splitlines()[-1]
    assert wait_until(lambda: "RUNNING" in stack.cli("status", batch).stdout, 120), stack.logs()
    # WHEN it is cancelled while its items run, and the command waits for the cancel to take hold
    cancelled = stack.cli("cancel", batch, "--wait", "--timeout", "120")
    assert cancelled.returncode == 0 and f"batch {batch} cancelled" in cancelled.stdout, cancelled.stderr
    # THEN it returned once the batch read CANCELLED, and one summary says so
    assert f"{batch}: cancelled" in cancelled.stderr, cancelled.stderr
    assert "CANCELLED" in stack.cli("status", batch).stdout
    summary = notice_for(stack, inbox, batch, wait_s=120)
    assert summary["status"] == "cancelled" and summary["stage"] == "batch", summary
    # WHEN it is retried without the faults, the command waiting for it and fetching its outputs
    stack.set_faults([])
    outputs = tmp_path / "outputs"
    retried = stack.cli("retry", batch, "--wait", "--output-dir", str(outputs), "--timeout", "300")
    assert retried.returncode == 0 and f"batch {batch} retried" in retried.stdout, retried.stderr
    # THEN a second summary says every item succeeded, and each output, in the folder the retry named, is its target's
    summary = notice_for(stack, inbox, batch, wait_s=300)
    assert summary["status"] == "succeeded", summary
    assert summary["items"] == {"total": 3, "succeeded": 3, "unsuccessful": 0}
    for path in targets:
        check_output(outputs / path.name, path)
    others = [n for n in stack.notifications(inbox, wait_s=3, count=10) if str(n.get("job_id", "")).startswith(batch)]
    assert others == []


def test_a_tenant_submits_a_batch_through_the_api_and_follows_it_as_one_job(stack: Stack, media: Path) -> None:
    # GIVEN a tenant's token, and a body naming a face and two targets by their file names
    api, token = api_url(stack), api_token(stack, "acme")
    body = {"source": "face.jpg", "targets": ["photo-2.webp", "clip-0.mp4"], "engine": "copy"}
    status, created = api_call(api, token, "POST", "/jobs", body)
    assert status == 201, created
    job = created["job_id"]
    files = {
        "face.jpg": grace_hopper_path(),
        "photo-2.webp": media / "photo-2.webp",
        "clip-0.mp4": media / "clip-0.mp4",
    }
    assert sorted(upload["name"] for upload in created["uploads"]) == sorted(files)
    for upload in created["uploads"]:
        assert post_file(upload, files[upload["name"]]) == 204
    # WHEN it starts
    status, started = api_call(api, token, "POST", f"/jobs/{job}/start")
    assert status == 202, started
    # THEN the tenant follows it under its own id, as one row counting its items, to its end
    view: dict[str, Any] = {}
    assert wait_until(lambda: _api_ended(api, token, job, view), 300), (view, stack.logs())
    assert view["job_id"] == job and view["state"] == "SUCCEEDED", view
    assert view["items"] == {"done": 2, "failed": 0, "running": 0, "total": 2}, view
    # AND each output is under the tenant's prefix, its target's own
    for name in ("photo-2.webp", "clip-0.mp4"):
        output = _download(stack, f"tenants/acme/outputs/{job}/{name}", media.parent / f"api-{name}")
        check_output(output, media / name)
    # AND its detail lists its items a page at a time: each its target's name, state, progress and output
    pages = [api_call(api, token, "GET", f"/jobs/{job}/detail?items=1&items_from={first}") for first in (0, 1)]
    assert [status for status, _ in pages] == [200, 200], pages
    assert [page["next_item"] for _, page in pages] == [1, None]
    shown = [item for _, page in pages for item in page["items"]]
    assert [(i["index"], i["target"], i["state"], i["output"]) for i in shown] == [
        (0, "photo-2.webp", "SUCCEEDED", "photo-2.webp"), (1, "clip-0.mp4", "SUCCEEDED", "clip-0.mp4"),
    ], shown  # fmt: skip
    assert [i["segments"]["done"] == i["segments"]["total"] > 0 for i in shown] == [True, True], shown
    with urllib.request.urlopen(shown[0]["download_url"], timeout=30) as response:
        assert response.read() == (stack.client("s3").get_object(Bucket=stack.resources.media_bucket,
            Key=f"tenants/acme/outputs/{job}/photo-2.webp")["Body"].read())  # fmt: skip
    # AND a retry of the succeeded batch is refused, naming it by the tenant's id
    status, refused = api_call(api, token, "POST", f"/jobs/{job}/retry")
    assert status == 409 and job in json.dumps(refused), refused


def _api_ended(api: str, token: str, job: str, view: dict[str, Any]) -> bool:
    status, found = api_call(api, token, "GET", f"/jobs/{job}")
    assert status == 200, found
    view.update(found)
    # the view says whether the job ended: WAITING (in the tenant's line, behind other tests' jobs) has not
    return bool(found["ended"])


def _download(stack: Stack, key: str, path: Path) -> Path:
    stack.client("s3").download_file(stack.resources.media_bucket, key, str(path))
    return path


def _exists(stack: Stack, key: str) -> bool:
    listing = stack.client("s3").list_objects_v2(Bucket=stack.resources.work_bucket, Prefix=key)
    return int(listing.get("KeyCount", 0)) > 0

"""Image targets through the same path as a one-segment job, on moto: slicer → worker → merge, with the classic engine.

The output keeps the target's format (or the one its key names), its size follows FaceFusion's
`output_image_scale`, its JPEG/WebP quality FaceFusion's `output_image_quality`, an alpha plane stays,
and the swapped face is really there (dlib's descriptor of the output's face moves towards the source's).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from fleetctl.samples import astronaut, grace_hopper_path
from fusionfleet import layout
from fusionfleet.adapters.notify import SnsNotifier
from fusionfleet.adapters.orchestrator import StepFunctions
from fusionfleet.adapters.storage import S3Storage
from fusionfleet.media.image import check_image, decode_image
from fusionfleet.media.limits import MediaLimits
from fusionfleet.messages import JobContext
from fusionfleet.services.slicing import Slicer
from tests.integration.conftest import Aws, upload
from tests.integration.test_worker_loop import merge_once, plan, recorder, render_worker, send_render
from tests.support.jobs import slicer_config

pytestmark = pytest.mark.timeout(300)


def _slice(aws: Aws, name: str, manifest: dict[str, Any]) -> tuple[str, JobContext | None, str]:
    aws.s3.put_object(Bucket=aws.media_bucket, Key=f"jobs/{name}.json", Body=json.dumps(manifest).encode())
    slicer = Slicer(
        S3Storage(aws.s3), StepFunctions(aws.sfn), SnsNotifier(aws.sns),
        slicer_config(aws.work_bucket, aws.state_machine_arn, aws.topic_arn),
    )  # fmt: skip
    outcome = slicer.handle(aws.media_bucket, f"jobs/{name}.json")
    if outcome.status != "started":
        return outcome.status, None, outcome.reason
    payload = json.loads(aws.sfn.describe_execution(executionArn=outcome.execution_arn)["input"])
    return outcome.status, JobContext.model_validate(payload["job"]), ""


def _render(aws: Aws, job: JobContext, tmp_path: Path) -> dict[str, Any]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    for segment in plan(aws, job):
        send_render(aws, "RenderQueueHigh", job, segment, f"t{segment['index']}")
    assert render_worker(aws, tmp_path, recorder(aws)).run(max_tasks=len(plan(aws, job))) == len(plan(aws, job))
    orchestrator = merge_once(aws, job, tmp_path)
    (success,) = [call for call in orchestrator.calls if call[0] == "success"]
    result: dict[str, Any] = success[2]
    return result


def _target(tmp_path: Path, extension: str, alpha: bool = False, size: tuple[int, int] = (300, 300)) -> Path:
    picture = cv2.resize(astronaut(), size, interpolation=cv2.INTER_AREA)
    if alpha:
        ramp = np.tile(np.linspace(40, 255, size[0], dtype=np.uint8), (size[1], 1))
        picture = np.dstack([picture, ramp])
    path = tmp_path / f"target{extension}"
    assert cv2.imwrite(str(path), picture)
    return path


def _output(aws: Aws, key: str) -> bytes:
    return bytes(aws.s3.get_object(Bucket=aws.media_bucket, Key=key)["Body"].read())


@pytest.mark.parametrize(("extension", "image_format"), [(".jpg", "jpeg"), (".png", "png"), (".webp", "webp"),
                                                          (".bmp", "bmp"), (".tif", "tiff")])  # fmt: skip
def test_an_image_target_is_swapped_and_keeps_its_format(
    aws: Aws, tmp_path: Path, extension: str, image_format: str
) -> None:
    # GIVEN a face and an image target of this format
    upload(aws, "inputs/face.jpg", grace_hopper_path())
    upload(aws, f"inputs/photo{extension}", _target(tmp_path, extension))
    manifest = {"source": "inputs/face.jpg", "target": f"inputs/photo{extension}", "engine": "classic"}
    # WHEN it is sliced, rendered and merged
    status, job, reason = _slice(aws, "photo", manifest)
    assert status == "started", reason
    assert job is not None and job.image is not None and job.segment_count == 1 and job.frame_count == 1
    result = _render(aws, job, tmp_path / "work")
    # THEN the output is beside the drop, with the target's own extension and format, at its size
    assert job.output.key == f"outputs/photo{extension}" and result["output"]["key"] == job.output.key
    info = check_image(_output(aws, job.output.key), "output", MediaLimits())
    assert (info.format, info.width, info.height) == (image_format, 300, 300)
    # AND the segment's own picture was kept losslessly as PNG in the work bucket
    assert aws.s3.head_object(Bucket=aws.work_bucket, Key=layout.segment_key(job.job_id, 0, "png"))
    # AND the face changed where the astronaut's face is (the rest of the picture much less)
    before, _ = decode_image((tmp_path / f"target{extension}").read_bytes(), "t", MediaLimits())
    after, _ = decode_image(_output(aws, job.output.key), "o", MediaLimits())
    face = (slice(40, 130), slice(100, 190))  # the astronaut's face in the 300×300 picture
    changed = np.abs(after.astype(int) - before.astype(int)).mean(axis=2)
    assert changed[face].mean() > 3 * max(1.0, float(np.median(changed)))


def test_scale_quality_another_format_and_alpha_follow_facefusions_rules(aws: Aws, tmp_path: Path) -> None:
    upload(aws, "inputs/face.jpg", grace_hopper_path())
    upload(aws, "inputs/clear.png", _target(tmp_path, ".png", alpha=True, size=(301, 203)))
    # GIVEN a PNG with an alpha plane written at half size, and the same at twice the size as WebP
    half = {"source": "inputs/face.jpg", "target": "inputs/clear.png", "engine": "classic",
            "options": {"output_image_scale": 0.5}}  # fmt: skip
    double = {
        **half,
        "output": "outputs/double.webp",
        "options": {"output_image_scale": 2.0, "output_image_quality": 90},
    }
    results = {}
    for name, manifest in (("half", half), ("double", double)):
        status, job, reason = _slice(aws, name, manifest)
        assert status == "started" and job is not None and job.image is not None, reason
        _render(aws, job, tmp_path / name)
        results[name] = (job, _output(aws, job.output.key))
    # THEN half size is FaceFusion's: int(301 × 0.5) = 150 → 150, int(203 × 0.5) = 101 → 100 (even), rendered at it
    job, data = results["half"]
    assert job.image is not None and (job.image.width, job.image.height) == (150, 100)
    assert job.image.work_size == (150, 100)
    info = check_image(data, "half", MediaLimits())
    assert (info.format, info.width, info.height, info.alpha) == ("png", 150, 100, True)
    # AND the alpha plane is the target's, shrunk with it
    _, alpha = decode_image(data, "half", MediaLimits())
    assert alpha is not None and alpha[:, 0].mean() < 60 and alpha[:, -1].mean() > 240
    # AND twice the size is rendered at the target's size and written at 602×406 as the WebP its key asks for
    job, data = results["double"]
    assert job.image is not None and job.image.work_size == (301, 203) and job.output.key == "outputs/double.webp"
    info = check_image(data, "double", MediaLimits())
    assert (info.format, info.width, info.height) == ("webp", 602, 406)


def test_jpeg_quality_is_facefusions_compression(aws: Aws, tmp_path: Path) -> None:
    upload(aws, "inputs/face.jpg", grace_hopper_path())
    upload(aws, "inputs/photo.jpg", _target(tmp_path, ".jpg"))
    sizes = {}
    for quality in (10, 95):
        manifest = {"source": "inputs/face.jpg", "target": "inputs/photo.jpg", "engine": "copy",
                    "output": f"outputs/q{quality}.jpg", "options": {"output_image_quality": quality}}  # fmt: skip
        status, job, reason = _slice(aws, f"q{quality}", manifest)
        assert status == "started" and job is not None, reason
        _render(aws, job, tmp_path / f"q{quality}")
        sizes[quality] = len(_output(aws, job.output.key))
    # THEN quality 10 (compression 28) is a far smaller file than quality 95 (compression 2)
    assert sizes[10] * 3 < sizes[95], sizes


def test_an_image_target_with_a_video_output_or_a_video_with_an_image_output_is_refused(
    aws: Aws, tmp_path: Path
) -> None:
    upload(aws, "inputs/face.jpg", grace_hopper_path())
    upload(aws, "inputs/photo.png", _target(tmp_path, ".png"))
    status, _job, reason = _slice(aws, "wrong", {"source": "inputs/face.jpg", "target": "inputs/photo.png",
                                                 "output": "outputs/wrong.mp4"})  # fmt: skip
    assert status == "rejected" and "must end in an image extension" in reason and "the target is an image" in reason
    # AND an image renamed .mp4 is still an image: its default output takes its format's extension
    upload(aws, "inputs/renamed.mp4", _target(tmp_path, ".png"))
    status, job, reason = _slice(aws, "renamed", {"source": "inputs/face.jpg", "target": "inputs/renamed.mp4",
                                                  "engine": "copy"})  # fmt: skip
    assert status == "started" and job is not None and job.output.key == "outputs/renamed.png", reason


def test_the_image_workflow_is_accepted_for_an_image_and_refused_for_a_video(
    aws: Aws, tmp_path: Path, clip: Path
) -> None:
    # GIVEN a FaceFusion job on a photo asking for FaceFusion's image-to-image workflow, and one on a clip
    upload(aws, "inputs/face.jpg", grace_hopper_path())
    upload(aws, "inputs/photo.png", _target(tmp_path, ".png"))
    upload(aws, "inputs/clip.mp4", clip)
    image = {"source": "inputs/face.jpg", "target": "inputs/photo.png", "engine": "facefusion",
             "options": {"workflow_mode": "image-to-image"}}  # fmt: skip
    # WHEN each is sliced THEN the photo's job starts (its workflow is the target's), the clip's is refused
    status, job, reason = _slice(aws, "photo", image)
    assert status == "started" and job is not None and job.image is not None, reason
    status, _, reason = _slice(aws, "clip", {**image, "target": "inputs/clip.mp4"})
    assert status == "rejected" and "'image-to-image' renders an image target, and the target is a video" in reason

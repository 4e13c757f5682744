"""Inputs that must work through the whole pipeline, and faces the engine must refuse, on LocalStack."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from fleetctl.samples import grace_hopper, read_stamp
from fusionfleet.jobs.ids import job_id
from tests.e2e.conftest import Stack
from tests.e2e.helpers import drop_job, notice_for, queues_empty, wait_until
from tests.support.media import decode_all, ffmpeg, write_video

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def media(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("inputs")


@pytest.fixture(scope="module")
def base(media: Path) -> Path:
    return write_video(media / "base.mp4", seconds=4, fps=25, width=320, height=240, with_stamp=True)


def run(stack: Stack, name: str, target: Path, tmp_path: Path, **fields: object) -> tuple[dict[str, object], Path]:
    inbox = stack.subscribe()
    job = drop_job(stack, name, target, **fields)
    notice = notice_for(stack, inbox, job, wait_s=180)
    output = tmp_path / "out.mp4"
    if notice["status"] == "succeeded":
        where = notice["output"]
        assert isinstance(where, dict)
        stack.client("s3").download_file(where["bucket"], where["key"], str(output))
    return notice, output


def test_no_audio_track(stack: Stack, media: Path, tmp_path: Path) -> None:
    silent = write_video(media / "silent.mp4", seconds=3, fps=25, width=320, height=240, audio=False, with_stamp=True)
    notice, output = run(stack, "silent", silent, tmp_path)
    assert notice["status"] == "succeeded", notice
    info, frames = decode_all(output)
    assert len(frames) == 75 and info.audio == ()


def test_several_audio_tracks_are_all_kept(stack: Stack, base: Path, media: Path, tmp_path: Path) -> None:
    dual = media / "dual.mp4"
    ffmpeg("-i", str(base), "-f", "lavfi", "-i", "sine=frequency=880:duration=4", "-map", "0:v", "-map", "0:a",
           "-map", "1:a", "-c:v", "copy", "-c:a", "aac", "-shortest", str(dual))  # fmt: skip
    source, _ = decode_all(dual)
    notice, output = run(stack, "dual audio", dual, tmp_path)
    assert notice["status"] == "succeeded", notice
    info, frames = decode_all(output)
    assert len(frames) == 100 and len(info.audio) == 2
    for ours, theirs in zip(info.audio, source.audio, strict=True):
        assert abs(ours.duration_s - theirs.duration_s) <= 1 / 25


def test_variable_frame_rate_stays_in_sync(stack: Stack, base: Path, media: Path, tmp_path: Path) -> None:
    # GIVEN a clip that lost every fifth frame but kept the others' timestamps (variable rate, 20 fps on average)
    vfr = media / "vfr.mp4"
    ffmpeg("-i", str(base), "-vf", "select='not(eq(mod(n\\,5)\\,2))'", "-fps_mode", "passthrough",
           "-c:v", "libx264", "-crf", "12", "-c:a", "copy", str(vfr))  # fmt: skip
    source, _ = decode_all(vfr)
    assert source.variable_frame_rate
    notice, output = run(stack, "vfr", vfr, tmp_path)
    assert notice["status"] == "succeeded", notice
    info, frames = decode_all(output)
    fps = float(info.fps)
    # THEN each output frame shows the picture the source showed at that moment: A/V drift under a frame
    for index, image in enumerate(frames):
        shown_at = read_stamp(image) / 25
        assert abs(shown_at - index / fps) <= 1 / fps + 1e-6, (index, read_stamp(image))
    assert abs(info.duration_s - info.audio[0].duration_s) <= 1 / fps + 0.03


def test_a_rotated_phone_video_comes_out_upright(stack: Stack, base: Path, media: Path, tmp_path: Path) -> None:
    rotated = media / "phone.mp4"
    ffmpeg("-display_rotation", "90", "-i", str(base), "-c", "copy", str(rotated))
    _, upright_source = decode_all(base)
    notice, output = run(stack, "phone", rotated, tmp_path)
    assert notice["status"] == "succeeded", notice
    info, frames = decode_all(output)
    assert (info.width, info.height, info.rotation) == (240, 320, 0)
    expected = np.rot90(upright_source[10], 1)
    assert float(np.mean(np.abs(frames[10].astype(np.int16) - expected))) < 6


def test_odd_dimensions(stack: Stack, media: Path, tmp_path: Path) -> None:
    frames_dir = media / "odd.mp4"
    wide = write_video(media / "wide.mp4", seconds=2, fps=25, width=854, height=480, with_stamp=True)
    crop = ["-vf", "format=yuv444p,crop=853:480:0:0", "-c:v", "libx264", "-pix_fmt", "yuv444p", "-c:a", "copy"]
    ffmpeg("-i", str(wide), *crop, str(frames_dir))
    notice, output = run(stack, "odd size", frames_dir, tmp_path)
    assert notice["status"] == "succeeded", notice
    info, frames = decode_all(output)
    assert (info.width, info.height) == (854, 480) and len(frames) == 50
    assert [read_stamp(image) for image in frames] == list(range(50))


def test_keys_with_spaces_plus_percent_and_unicode(stack: Stack, base: Path, tmp_path: Path) -> None:
    notice, output = run(stack, "Zoë + friends 100% ünïcødé", base, tmp_path)
    assert notice["status"] == "succeeded", notice
    where = notice["output"]
    assert isinstance(where, dict) and where["key"] == "outputs/Zoë + friends 100% ünïcødé.mp4"
    assert len(decode_all(output)[1]) == 100


def face_job(stack: Stack, name: str, face: np.ndarray, target: Path) -> dict[str, object]:
    """A classic-engine job whose only source is `face`; returns its final notice."""
    s3 = stack.client("s3")
    bucket = stack.resources.media_bucket
    ok, encoded = cv2.imencode(".png", face)
    assert ok
    s3.put_object(Bucket=bucket, Key=f"inputs/{name}/face.png", Body=encoded.tobytes())
    s3.upload_file(str(target), bucket, f"inputs/{name}/{target.name}")
    manifest = {"version": 1, "source": [f"inputs/{name}/face.png"], "target": f"inputs/{name}/{target.name}",
                "engine": "classic", "priority": "high"}  # fmt: skip
    inbox = stack.subscribe()
    etag = s3.put_object(Bucket=bucket, Key=f"jobs/{name}.json", Body=json.dumps(manifest).encode())["ETag"]
    return notice_for(stack, inbox, job_id(bucket, f"jobs/{name}.json", etag), wait_s=240)


@pytest.mark.parametrize(
    ("name", "make", "reason"),
    [
        ("faceless", lambda: np.full((400, 400, 3), 128, np.uint8), "has no detectable face"),
        ("two faces", lambda: np.hstack([grace_hopper(), grace_hopper()]), "shows 2 faces of similar size"),
    ],
)
def test_a_face_image_without_exactly_one_face_fails_the_job_with_the_reason(
    stack: Stack, base: Path, name: str, make: object, reason: str
) -> None:
    assert callable(make)
    notice = face_job(stack, name, make(), base)
    assert notice["status"] == "failed" and reason in str(notice["reason"]), notice
    assert wait_until(lambda: queues_empty(stack), 60)

"""The merge's before/after preview, from real videos: only the sampled frames, target left, output right."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from fleetctl.samples import read_stamp
from fusionfleet.adapters.storage import S3RangeSource
from fusionfleet.media.limits import MediaLimits
from fusionfleet.media.probe import VideoInfo, probe_video
from fusionfleet.media.ranges import FileRangeSource, RangeReader
from fusionfleet.messages import ObjectRef, Preview
from gpu_worker.merging.merge import make_preview
from gpu_worker.merging.preview import render_preview
from tests.support.fakes import FakeStorage
from tests.support.jobs import MEDIA, job_context
from tests.support.media import ffmpeg, write_video


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("preview")
    return write_video(folder / "target.mp4", seconds=4, fps=25, width=320, height=240, with_stamp=True)


@pytest.fixture(scope="module")
def output(target: Path) -> Path:
    """What a render might give back: the same frames, mirrored (the stamp stays readable on the target)."""
    mirrored = target.parent / "output.mp4"
    ffmpeg("-i", str(target), "-vf", "hflip", "-c:v", "libx264", "-crf", "18", "-an", str(mirrored))
    return mirrored


def probe(path: Path) -> tuple[RangeReader, VideoInfo]:
    reader = RangeReader(FileRangeSource(path), path.name)
    return reader, probe_video(reader, path.name, MediaLimits())


def preview_from(storage: FakeStorage, target: Path, merged: Path) -> Preview | None:
    """The merge's preview of `merged`, for a job whose target (put in the media bucket here) writes
    outputs/clip.mp4."""
    storage.put_bytes(MEDIA, "inputs/clip.mp4", target.read_bytes(), "video/mp4")
    _, info = probe(target)
    stored = ObjectRef(bucket=MEDIA, key="inputs/clip.mp4", size=info.size_bytes)
    job = job_context(video=info, frame_count=info.frame_count, target=stored)
    reader = RangeReader(S3RangeSource(storage, MEDIA, "inputs/clip.mp4", info.size_bytes), "target")
    return make_preview(storage, job, reader, merged)


def test_the_sheet_shows_the_sampled_frames_target_left_output_right(target: Path, output: Path) -> None:
    # GIVEN a 100-frame target and its (mirrored) output
    target_reader, target_info = probe(target)
    output_reader, output_info = probe(output)
    # WHEN the preview is rendered
    data, (width, height), frames = render_preview(target_reader, target_info, output_reader, output_info)
    # THEN it is a JPEG of 2 columns × 4 rows of 320×240 cells, showing frames spread over the video
    sheet = np.asarray(cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR), dtype=np.uint8)
    assert data[:3] == b"\xff\xd8\xff" and sheet.shape == (height, width, 3) == (4 * 240, 2 * 320, 3)
    assert frames == (12, 37, 62, 87)
    for row, index in enumerate(frames):
        before = sheet[row * 240 : (row + 1) * 240, :320]
        after = sheet[row * 240 : (row + 1) * 240, 320:]
        # AND each row is that frame: the target's stamp, and the output's picture mirrored back
        assert read_stamp(before) == index
        assert float(np.mean(np.abs(before.astype(np.int16) - after[:, ::-1].astype(np.int16)))) < 12


def test_the_preview_is_stored_beside_the_output_with_a_link(target: Path, output: Path) -> None:
    # GIVEN the target in the media bucket and a job that writes outputs/clip.mp4
    storage = FakeStorage()
    # WHEN the merge makes its preview from the merged file
    preview = preview_from(storage, target, output)
    # THEN it is a JPEG at outputs/clip.preview.jpg with a presigned link and its size
    assert preview is not None
    assert (preview.bucket, preview.key) == (MEDIA, "outputs/clip.preview.jpg")
    assert preview.url.startswith(f"https://{MEDIA}.fake/outputs/clip.preview.jpg")
    assert (preview.width, preview.height, len(preview.frames)) == (640, 960, 4)
    assert storage.get_bytes(MEDIA, "outputs/clip.preview.jpg")[:3] == b"\xff\xd8\xff"
    # AND it carries the output's retention tag (template: OutputRetentionDays expires it with the output)
    assert storage.tags[(MEDIA, "outputs/clip.preview.jpg")] == {"fusionfleet-retention": "output"}


def test_a_preview_that_cannot_be_made_does_not_fail_the_job(target: Path, tmp_path: Path) -> None:
    # GIVEN a merged "output" that is not a video
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"not a video at all")
    storage = FakeStorage()
    # WHEN the preview is attempted THEN there is none, and nothing is stored
    assert preview_from(storage, target, broken) is None
    assert not storage.exists(MEDIA, "outputs/clip.preview.jpg")


class RefusingStorage(FakeStorage):
    def put_bytes(self, bucket: str, key: str, data: bytes, content_type: str = "application/octet-stream") -> str:
        if key.endswith(".jpg"):
            raise RuntimeError("AccessDenied")
        return super().put_bytes(bucket, key, data, content_type)


def test_a_preview_the_bucket_refuses_does_not_fail_the_job(target: Path, output: Path) -> None:
    assert preview_from(RefusingStorage(), target, output) is None

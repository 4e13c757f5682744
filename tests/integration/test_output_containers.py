"""The output's container and encoders through the real path (issue 42 item 4): the slicer plans the job from
its manifest, render workers encode its segments in the container the codec needs, and the merge writes the
container the output key names, with the encoder FaceFusion would use there. Each output is read back as
ffprobe would (PyAV): container, codec, pixel format, frame count, sound."""

from __future__ import annotations

import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import imageio_ffmpeg
import numpy as np
import pytest

from fleetctl.samples import grace_hopper_path
from fusionfleet.jobs.encoding import encoder_settings
from fusionfleet.jobs.plan import SegmentPolicy
from fusionfleet.media.ffmpeg import encode_segment_argv
from fusionfleet.media.inspect import summarize
from fusionfleet.messages import JobContext
from tests.integration.conftest import Aws, started_job
from tests.integration.test_worker_loop import merge_once, plan, recorder, render_worker, send_render

pytestmark = pytest.mark.timeout(300)


def render(aws: Aws, tmp_path: Path, target: Path, target_key: str, **fields: Any) -> tuple[JobContext, Path]:
    """Slice a `copy` job of the target in segments of about a second, render and merge it; its output, fetched."""
    seconds = SegmentPolicy(target_seconds=2, min_seconds=1, max_seconds=2.5)
    job = started_job(aws, target, target_key, seconds, engine="copy", **fields)
    segments = plan(aws, job)
    assert len(segments) >= 2, segments  # the merge joins segments by stream copy in the job's container
    for segment in segments:
        send_render(aws, "RenderQueueNormal", job, segment, f"t{segment['index']}")
    assert render_worker(aws, tmp_path, recorder(aws)).run(max_tasks=len(segments)) == len(segments)
    calls = merge_once(aws, job, tmp_path).calls
    assert [call[0] for call in calls if call[0] != "heartbeat"] == ["success"], calls
    result = tmp_path / job.output.key.rsplit("/", 1)[-1]
    aws.s3.download_file(aws.media_bucket, job.output.key, str(result))
    return job, result


def probe(path: Path) -> dict[str, Any]:
    with av.open(str(path)) as container:
        video = container.streams.video[0]
        return {
            "format": container.format.name,
            "codec": video.codec_context.name,
            "pix_fmt": video.codec_context.pix_fmt,
            "alpha_mode": video.metadata.get("ALPHA_MODE"),
            "audio": [track.codec_context.name for track in container.streams.audio],
        }


def alpha_plane(path: Path) -> np.ndarray:
    """The first frame's alpha as libvpx decodes it (FFmpeg's own VP9 decoder drops the alpha)."""
    argv = [imageio_ffmpeg.get_ffmpeg_exe(), "-v", "error", "-c:v", "libvpx-vp9", "-i", str(path), "-frames:v", "1",
            "-f", "rawvideo", "-pix_fmt", "rgba", "-"]  # fmt: skip
    rgba = np.frombuffer(subprocess.run(argv, capture_output=True, check=True, timeout=60).stdout, np.uint8)
    return rgba.reshape(240, 320, 4)[:, :, 3]


def test_a_webm_output_is_vp9_with_alpha_plane_and_opus_sound_as_facefusion_writes_it(
    aws: Aws, clip: Path, tmp_path: Path
) -> None:
    # GIVEN an MP4 target (AAC sound) and an output named .webm, asking for x264 (FaceFusion swaps it for VP9)
    job, result = render(
        aws, tmp_path, clip, "inputs/clip.mp4", output="outputs/t.webm", options={"output_video_encoder": "libx264"}
    )
    # THEN the output is a WebM of VP9 in yuva420p (its alpha plane, opaque: no frame carried a matte)
    assert job.encoder.codec == "libvpx-vp9" and job.encoder.container == "webm"
    found = probe(result)
    assert found["format"].startswith("matroska") and found["codec"] == "vp9" and found["alpha_mode"] == "1", found
    assert int(alpha_plane(result).min()) == 255
    # AND every frame is there, with the sound re-encoded to Opus (a WebM takes no AAC)
    summary = summarize(result)
    assert summary.frame_count == 100 and abs(summary.duration_s - 4.0) <= 0.04
    assert found["audio"] == ["opus"] and len(summary.audio_durations_s) == 1
    assert abs(summary.audio_durations_s[0] - 4.0) <= 0.05
    head = aws.s3.head_object(Bucket=aws.media_bucket, Key=job.output.key)
    assert head["ContentType"] == "video/webm"


def test_an_mkv_target_keeps_its_container_by_default_with_the_named_hevc_and_the_sound_copied(
    aws: Aws, clip_mkv: Path, tmp_path: Path
) -> None:
    # GIVEN a Matroska target and no output named
    job, result = render(aws, tmp_path, clip_mkv, "inputs/clip.mkv", options={"output_video_encoder": "libx265"})
    # THEN the output is named and written as Matroska, HEVC in yuv420p, every frame, the AAC copied
    assert job.output.key == "outputs/t.mkv"
    found = probe(result)
    assert (found["format"], found["codec"], found["pix_fmt"]) == ("matroska,webm", "hevc", "yuv420p"), found
    summary = summarize(result)
    assert summary.frame_count == 100 and found["audio"] == ["aac"]
    assert abs(summary.duration_s - 4.0) <= 0.04 and abs(summary.audio_durations_s[0] - 4.0) <= 0.05


def test_raw_video_goes_to_a_mov_in_rgb24(aws: Aws, clip: Path, tmp_path: Path) -> None:
    # GIVEN an output named .mov and FaceFusion's rawvideo encoder
    job, result = render(
        aws, tmp_path, clip, "inputs/clip.mp4", output="outputs/t.mov", options={"output_video_encoder": "rawvideo"}
    )
    # THEN the output is a QuickTime file of uncompressed rgb24 frames, every one, the AAC copied
    found = probe(result)
    assert found["format"].startswith("mov") and found["codec"] == "rawvideo" and found["pix_fmt"] == "rgb24", found
    summary = summarize(result)
    assert summary.frame_count == 100 and found["audio"] == ["aac"]
    assert aws.s3.head_object(Bucket=aws.media_bucket, Key=job.output.key)["ContentType"] == "video/quicktime"


def test_swap_on_one_machine_writes_the_container_its_output_names(clip: Path, tmp_path: Path) -> None:
    # GIVEN `fusionfleet swap --output out.mkv` of an MP4 target
    output = tmp_path / "out.mkv"
    argv = [sys.executable, "-m", "fleetctl.cli", "swap", "--source", str(grace_hopper_path()), "--target", str(clip),
            "--output", str(output), "--engine", "copy"]  # fmt: skip
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    # THEN it is a Matroska file of every frame, with the sound
    found = probe(output)
    assert found["format"] == "matroska,webm" and found["codec"] == "h264" and found["audio"] == ["aac"], found
    assert summarize(output).frame_count == 100


@pytest.mark.parametrize(("encoder", "container"), [("libvpx-vp9", "webm"), ("rawvideo", "mov")])
def test_a_segment_in_another_codec_is_the_same_bytes_each_time_it_is_encoded(
    encoder: str, container: str, tmp_path: Path
) -> None:
    # GIVEN the same frames WHEN encoded twice with the job's settings (as a redelivered segment is)
    settings = encoder_settings(
        320, 240, Fraction(25), {"output_video_encoder": encoder}, 25, engine="facefusion", container=container
    )
    rng = np.random.default_rng(7)
    frames = rng.integers(0, 255, (25, 240, 320, 3), np.uint8).tobytes()
    made = []
    for attempt in range(2):
        path = tmp_path / f"{attempt}.mp4"
        argv = [imageio_ffmpeg.get_ffmpeg_exe(), *encode_segment_argv(320, 240, settings, path)]
        subprocess.run(argv, input=frames, check=True, timeout=120, capture_output=True)
        made.append(path.read_bytes())
    # THEN the files are identical, byte for byte
    assert made[0] == made[1]

"""Where a job is encoded: chosen once per job at planning from the fleet's encoder device, never per segment."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from fusionfleet.jobs.encoding import encoder_settings
from fusionfleet.media.ffmpeg import encode_segment_argv, video_encoder
from fusionfleet.media.gpu_media import cpu_codec, job_codec, nvenc_preset
from tests.support.jobs import slicer_config


def test_a_job_naming_no_encoder_gets_the_fleets_default_on_its_device() -> None:
    assert job_codec(None, "libx264", "cpu") == "libx264"
    assert job_codec(None, "libx264", "nvenc") == "h264_nvenc"
    assert job_codec(None, "libx265", "nvenc") == "hevc_nvenc"


def test_a_job_naming_an_encoder_keeps_it_on_any_fleet() -> None:
    assert job_codec("libx264", "libx264", "nvenc") == "libx264"
    assert job_codec("libx265", "libx264", "cpu") == "libx265"


def test_an_unknown_device_is_refused_naming_the_devices() -> None:
    with pytest.raises(ValueError, match="cpu, nvenc"):
        job_codec(None, "libx264", "vaapi")
    with pytest.raises(ValueError, match="'vaapi' is not one of cpu, nvenc"):
        slicer_config("w", "arn:m", "arn:t", video_encoder_device="vaapi")


def test_nvenc_settings_share_the_cpu_encoders_profile_and_every_segment_is_alike() -> None:
    cpu = encoder_settings(1920, 1080, Fraction(25), {"output_video_quality": 80}, 125)
    gpu = encoder_settings(1920, 1080, Fraction(25), {"output_video_quality": 80}, 125, device="nvenc")
    assert (gpu.codec, gpu.profile, gpu.pix_fmt, gpu.crf, gpu.keyint) == ("h264_nvenc", "high", "yuv420p", 10, 50)
    assert (cpu.profile, cpu.pix_fmt, cpu.crf, cpu.keyint) == (gpu.profile, gpu.pix_fmt, gpu.crf, gpu.keyint)
    assert cpu_codec("hevc_nvenc") == "libx265" and cpu_codec("libx264") == "libx264"


def test_the_nvenc_argv_keeps_the_jobs_quality_chunk_keyframes_and_timing() -> None:
    gpu = encoder_settings(1920, 1080, Fraction(25), {"output_video_quality": 80}, 125, device="nvenc")
    assert video_encoder(gpu) == [
        "-c:v", "h264_nvenc", "-preset", "p3", "-tune", "hq", "-rc", "vbr", "-cq", "10", "-b:v", "0",
        "-profile:v", "high", "-pix_fmt", "yuv420p", "-g", "50", "-forced-idr", "1", "-no-scenecut", "1",
        "-fps_mode", "passthrough",
    ]  # fmt: skip
    argv = encode_segment_argv(1920, 1080, gpu, Path("out.mp4"))
    # The same input and output fragments as x264's: raw BGR frames in, the job's timescale out.
    cpu = encode_segment_argv(1920, 1080, encoder_settings(1920, 1080, Fraction(25), {}, 125), Path("out.mp4"))
    assert argv[: argv.index("-c:v")] == cpu[: cpu.index("-c:v")]
    assert argv[argv.index("-an") :] == cpu[cpu.index("-an") :]


def test_x264_presets_map_to_nvenc_presets() -> None:
    assert [nvenc_preset(p) for p in ("ultrafast", "veryfast", "medium", "veryslow", "unknown")] == [
        "p1", "p3", "p5", "p7", "p5",
    ]  # fmt: skip

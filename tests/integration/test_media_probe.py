"""The worker's GPU media probe (gpu_worker/rendering/media_probe.py), on the CPU: no device means no probe and a
reason; the comparisons that decide NVDEC and NVENC are exercised with the CPU's own decoder."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from gpu_worker.rendering.media_probe import (
    PROBE_FRAMES,
    GpuMedia,
    decode_clip,
    probe_frames,
    probe_gpu_media,
    probe_nvdec,
    probe_nvenc,
    same_frames,
    write_clip,
)


def test_without_an_nvidia_device_the_worker_uses_the_cpu_and_says_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    media = probe_gpu_media(tmp_path, device_present=lambda: False)
    assert media == GpuMedia(decode_why="no NVIDIA device", encode_why="no NVIDIA device")
    assert media.hwaccel() is None
    assert "GPU media: decoding on CPU (no NVIDIA device); no NVENC jobs (no NVIDIA device)" in caplog.text


def test_a_decoder_that_matches_the_cpus_frames_passes_the_nvdec_comparison(tmp_path: Path) -> None:
    # The CPU decoder stands in for NVDEC: equal frames are what lets a worker use it.
    assert probe_nvdec(tmp_path, hwaccel=lambda: None) is None


def test_a_decoder_that_fails_is_refused_with_its_reason(tmp_path: Path) -> None:
    def broken() -> object:
        raise RuntimeError("no CUDA device")

    assert probe_nvdec(tmp_path, hwaccel=broken) == "decoding on the GPU failed: no CUDA device"


def test_frames_that_differ_by_one_level_are_not_the_same(tmp_path: Path) -> None:
    frames = decode_clip(write_clip(tmp_path / "clip.mp4", probe_frames()))
    assert len(frames) == PROBE_FRAMES and same_frames(frames, frames) is None
    nudged = [frame.copy() for frame in frames]
    nudged[5][0, 0, 0] = np.uint8((int(nudged[5][0, 0, 0]) + 1) % 256)
    assert same_frames(frames, nudged) == "frame 5 differs from the CPU's decode (by up to 1 levels)"
    assert same_frames(frames, frames[:-1]) == f"{PROBE_FRAMES - 1} frames decoded, {PROBE_FRAMES} by the CPU"


def test_nvenc_on_a_machine_without_it_is_refused_with_ffmpegs_reason(tmp_path: Path) -> None:
    problem = probe_nvenc(tmp_path)
    assert problem is not None and problem.startswith("encoding with NVENC failed:"), problem

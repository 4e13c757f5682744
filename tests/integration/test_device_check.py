"""`make device-check` (scripts/device_check.py) on a machine without a GPU: what it skips and why, and the
comparisons it judges a GPU by, exercised with the CPU's own encoder, decoder and onnxruntime."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from fusionfleet.jobs.encoding import encoder_settings
from fusionfleet.media.ffmpeg import encode_segment_argv
from fusionfleet.media.runner import FramePipe
from gpu_worker.rendering.media_probe import probe_frames, write_clip
from scripts.device_check import (
    Proof,
    check_cuda_provider,
    check_warm_engine,
    compare_encodes,
    exit_code,
    provider_verdict,
    run_checks,
)
from tests.support import facefusion_harness as harness

pytestmark = pytest.mark.timeout(600)


def test_without_a_gpu_every_check_is_skipped_saying_why_and_the_run_passes_unless_a_gpu_is_required(
    tmp_path: Path,
) -> None:
    proofs = run_checks(lambda: False, None, tmp_path)
    assert [p.check for p in proofs] == ["GPU", "onnxruntime CUDA provider", "NVENC", "NVDEC", "warm FaceFusion engine"]
    assert all(p.status == "skipped" and p.detail for p in proofs)
    assert exit_code(proofs, require_gpu=False) == 0
    assert exit_code(proofs, require_gpu=True) == 1
    assert exit_code([*proofs, Proof("NVENC", "failed", "no device")], require_gpu=False) == 1


def test_the_provider_verdict_needs_every_model_on_cuda_alone_and_close_to_the_cpu() -> None:
    on_cuda = {"providers": ["CUDAExecutionProvider", "CPUExecutionProvider"], "max_difference": 2e-5}
    assert provider_verdict({"models": {"arcface": on_cuda}})[0]
    fell_back = {"providers": ["CPUExecutionProvider"], "max_difference": 0.0}
    ok, why = provider_verdict({"models": {"arcface": on_cuda, "yoloface": fell_back}})
    assert not ok and why == "yoloface fell back to ['CPUExecutionProvider']"
    far = {"providers": ["CUDAExecutionProvider"], "max_difference": 0.5}
    assert provider_verdict({"models": {"arcface": far}}) == (False, "arcface differs from the CPU by 0.5")
    assert not provider_verdict({"available": ["CPUExecutionProvider"], "models": {}})[0]


def test_an_encode_equal_to_the_cpus_passes_and_a_worse_or_mistimed_one_fails(tmp_path: Path) -> None:
    source = probe_frames()
    cpu = write_clip(tmp_path / "cpu.mp4", source)
    same = write_clip(tmp_path / "same.mp4", source)
    ok, detail = compare_encodes(source, cpu, same)
    assert ok and "timestamps equal" in detail, detail
    # A coarser encode of the same frames: lower PSNR than the CPU's at the job's setting.
    worse = _encode(tmp_path / "worse.mp4", source, {"output_video_quality": 10})
    ok, detail = compare_encodes(source, cpu, worse)
    assert not ok and "PSNR" in detail, detail
    # The same frames at another rate: every timestamp moves.
    mistimed = _encode(tmp_path / "mistimed.mp4", source, {}, Fraction(30))
    assert compare_encodes(source, cpu, mistimed) == (False, "the GPU's frame timestamps differ from the CPU's")


def _encode(path: Path, frames: list, options: dict[str, object], fps: Fraction = Fraction(25)) -> Path:  # type: ignore[type-arg]
    height, width = frames[0].shape[:2]
    settings = encoder_settings(width, height, fps, options, len(frames))
    with FramePipe(encode_segment_argv(width, height, settings, path), "test", 60) as pipe:
        for frame in frames:
            pipe.write(frame)
    return path


@pytest.mark.skipif(harness.skip_reason() is not None, reason=str(harness.skip_reason()))
def test_onnxruntime_without_cuda_is_caught_falling_back_to_the_cpu(tmp_path: Path) -> None:
    # FaceFusion's environment here has onnxruntime's CPU build: a session asked for CUDA alone falls back.
    proof = check_cuda_provider(str(harness.facefusion_python()), tmp_path)
    assert proof.status == "failed" and "fell back to ['CPUExecutionProvider']" in proof.detail, proof


@pytest.mark.skipif(harness.skip_reason() is not None, reason=str(harness.skip_reason()))
def test_a_warm_engine_that_would_render_on_the_cpu_is_not_taken_for_a_gpu_one(tmp_path: Path) -> None:
    proof = check_warm_engine(tmp_path)
    assert proof.status == "failed" and "it would render on cpu" in proof.detail, proof

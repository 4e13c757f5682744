"""`make device-check` / `python -m scripts.device_check`: what a GPU machine proves without downloading models.

Run on a GPU host (the worker image with the driver's `compute,utility,video` capabilities, or a checkout
with `make facefusion-env` and onnxruntime-gpu in FaceFusion's environment), in under five minutes:

1. the GPU: `nvidia-smi` lists it;
2. onnxruntime-gpu's CUDA provider runs FaceFusion's stand-in models (fleetctl/harness/standins,
   the real models' shapes) on the provider alone and agrees with the CPU provider;
3. NVENC: the job's NVENC argv encodes a 1280×720 clip with every frame, the same timestamps as x264's
   argv at the same setting, and a PSNR against the source at least x264's;
4. NVDEC: the GPU decodes to the CPU decoder's frames bit for bit (gpu_worker/rendering/media_probe.py);
5. the warm FaceFusion engine renders a segment on CUDA (FaceFusion 3.8.1's code, stand-in models).

It prints what it proved, what failed and what it skipped, with why. Exit 0 when nothing failed (skips
allowed), 1 when a check failed; `--require-gpu` also fails on a skipped check (for a GPU fleet's gate).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a file (`python scripts/device_check.py`), like scripts/demo.py

from fleetctl.samples import astronaut_frames  # noqa: E402
from gpu_worker.engines.base import Image  # noqa: E402
from gpu_worker.rendering.media_probe import decode_clip, has_nvidia_device, probe_nvdec, probe_nvenc, write_clip  # noqa: E402

STANDINS = "fleetctl.harness.standins"  # run with FaceFusion's interpreter, the project on its path
CLIP_FRAMES = 48
CLIP_SIZE = (1280, 720)
# Stand-in outputs on CUDA against the CPU provider: float32 kernels differ in the last bits only.
PROVIDER_TOLERANCE = 1e-3


@dataclass(frozen=True)
class Proof:
    check: str
    status: str  # "proved", "failed" or "skipped"
    detail: str


def proved(check: str, detail: str) -> Proof:
    return Proof(check, "proved", detail)


def failed(check: str, detail: str) -> Proof:
    return Proof(check, "failed", detail)


def skipped(check: str, detail: str) -> Proof:
    return Proof(check, "skipped", detail)


# ---------------------------------------------------------------- the GPU
def check_gpu() -> Proof:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return skipped("GPU", "no NVIDIA GPU here: nvidia-smi is not on PATH")
    listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30, check=False)
    if listed.returncode != 0 or "GPU" not in listed.stdout:
        return failed("GPU", f"nvidia-smi -L answered {listed.returncode}: {(listed.stdout + listed.stderr).strip()}")
    return proved("GPU", listed.stdout.strip().splitlines()[0])


# ---------------------------------------------------------------- onnxruntime's CUDA provider
PROVIDER_PROGRAM = r"""
import json, sys
import numpy as np
import onnxruntime as ort
folder, names = sys.argv[1], json.loads(sys.argv[2])
report = {"available": ort.get_available_providers(), "models": {}}
for name in names:
    path = f"{folder}/{name}"  # an ONNX file by its path in the folder (a .dfm is one too)
    cuda = ort.InferenceSession(path, providers=["CUDAExecutionProvider"])
    cpu = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(7)
    feed = {}
    for item in cuda.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in item.shape]
        feed[item.name] = rng.random(shape, dtype=np.float32)
    got, want = cuda.run(None, feed), cpu.run(None, feed)
    report["models"][name] = {
        "providers": cuda.get_providers(),
        "max_difference": max(float(np.abs(a - b).max()) for a, b in zip(got, want)),
    }
print(json.dumps(report))
"""


def provider_verdict(report: dict[str, object], tolerance: float = PROVIDER_TOLERANCE) -> tuple[bool, str]:
    """Whether every stand-in ran on CUDA alone and agreed with the CPU, and what was seen. Pure."""
    models = report.get("models")
    if not isinstance(models, dict) or not models:
        return False, f"no model ran (providers offered: {report.get('available')})"
    problems = []
    for name, seen in sorted(models.items()):
        if not seen["providers"] or seen["providers"][0] != "CUDAExecutionProvider":
            problems.append(f"{name} fell back to {seen['providers']}")
        elif seen["max_difference"] > tolerance:
            problems.append(f"{name} differs from the CPU by {seen['max_difference']:.2g}")
    if problems:
        return False, "; ".join(problems)
    worst = max(float(seen["max_difference"]) for seen in models.values())
    return True, f"{len(models)} stand-in models on CUDA alone, within {worst:.2g} of the CPU provider"


def check_cuda_provider(python: str | None, folder: Path) -> Proof:
    name = "onnxruntime CUDA provider"
    if python is None:
        return skipped(name, "no interpreter with FaceFusion's dependencies (make facefusion-env, or the worker image)")
    built = subprocess.run(
        [python, "-m", STANDINS, str(folder)],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    if built.returncode != 0:
        return failed(name, f"the stand-in models were not built: {built.stderr.strip()[-500:]}")
    models = list(json.loads(built.stdout))
    ran = subprocess.run(
        [python, "-c", PROVIDER_PROGRAM, str(folder), json.dumps(models)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    if ran.returncode != 0:
        return failed(name, f"a session could not run: {ran.stderr.strip()[-500:]}")
    ok, detail = provider_verdict(json.loads(ran.stdout.strip().splitlines()[-1]))
    return proved(name, detail) if ok else failed(name, detail)


# ---------------------------------------------------------------- NVENC and NVDEC
def psnr(reference: list[Image], decoded: list[Image]) -> float:
    """Mean PSNR of decoded frames against their source, in dB. Pure."""
    values = []
    for a, b in zip(reference, decoded, strict=True):
        error = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
        values.append(99.0 if error == 0 else 10 * np.log10(255.0**2 / error))
    return float(np.mean(values))


def timestamps(path: Path) -> list[float]:
    """Every video packet's presentation time in seconds, in order (read with PyAV)."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        base = stream.time_base
        assert base is not None
        return sorted(float(p.pts * base) for p in container.demux(stream) if p.pts is not None)


def compare_encodes(source: list[Image], cpu: Path, gpu: Path) -> tuple[bool, str]:
    """The GPU encode against the CPU's at the same setting: frame count, timing, quality. Pure but for reading."""
    cpu_frames, gpu_frames = decode_clip(cpu), decode_clip(gpu)
    if len(gpu_frames) != len(source) or len(cpu_frames) != len(source):
        return False, f"{len(gpu_frames)} frames from the GPU, {len(cpu_frames)} from the CPU, {len(source)} sent"
    if timestamps(gpu) != timestamps(cpu):
        return False, "the GPU's frame timestamps differ from the CPU's"
    gpu_psnr, cpu_psnr = psnr(source, gpu_frames), psnr(source, cpu_frames)
    detail = f"{len(source)} frames, timestamps equal; PSNR {gpu_psnr:.2f} dB (GPU) vs {cpu_psnr:.2f} dB (x264)"
    return gpu_psnr >= cpu_psnr, detail


def check_nvenc(folder: Path) -> Proof:
    name = "NVENC"
    problem = probe_nvenc(folder)
    if problem is not None:
        return failed(name, problem)
    width, height = CLIP_SIZE
    source = list(astronaut_frames(CLIP_FRAMES, width, height, 25))
    cpu = write_clip(folder / "x264.mp4", source)
    gpu = write_clip(folder / "nvenc.mp4", source, codec_device="nvenc")
    ok, detail = compare_encodes(source, cpu, gpu)
    return proved(name, detail) if ok else failed(name, detail)


def check_nvdec(folder: Path) -> Proof:
    problem = probe_nvdec(folder)
    if problem is not None:
        return failed("NVDEC", problem)
    return proved("NVDEC", "a probe clip decoded on the GPU to the CPU decoder's frames, bit for bit")


# ---------------------------------------------------------------- the warm engine
def check_warm_engine(folder: Path) -> Proof:
    from tests.support import facefusion_harness as harness

    name = "warm FaceFusion engine"
    why = harness.skip_reason()
    if why is not None:
        return skipped(name, why)
    from gpu_worker.engines.base import EngineJob
    from gpu_worker.engines.facefusion.execution import choose_provider
    from gpu_worker.engines.facefusion.host_facts import gather_facts
    from gpu_worker.engines.facefusion.settings import EngineSettings
    from gpu_worker.engines.facefusion.warm import WarmFaceFusionEngine

    home = harness.prepare(folder / "facefusion")
    settings = EngineSettings(home=home.home, python=home.python)
    # As a worker starts: the provider onnxruntime offers first (CUDA), proved on a tiny model.
    facts = gather_facts(settings, home.home, home.env)
    provider = choose_provider(facts.providers)
    if provider != "cuda":
        return failed(name, f"FaceFusion's environment offers {facts.providers}: it would render on {provider}")
    engine = WarmFaceFusionEngine(settings, facts, env=home.env)
    try:
        engine.prepare()
        frames = harness.clip(24)
        job = EngineJob("device-check", (harness.face_image(),), {"face_selector_mode": "one"}, work_dir=folder / "w")
        began = time.monotonic()
        images = list(engine.render(job, frames))
        took = time.monotonic() - began
    except Exception as error:
        return failed(name, f"{type(error).__name__}: {error}")
    finally:
        engine.close()
    ys, xs = harness.face_core()
    swapped = all(
        float(np.abs(image[ys, xs].astype(int) - (255 - frame.image[ys, xs].astype(int))).mean()) < 1.0
        for frame, image in zip(frames, images, strict=True)
    )
    if len(images) != len(frames) or not swapped:
        return failed(name, f"{len(images)} frames back for {len(frames)}, every face swapped: {swapped}")
    return proved(name, f"{len(frames)} frames swapped on the CUDA provider in {took:.2f} s ({facts.device_count} GPU)")


# ---------------------------------------------------------------- the run
def run_checks(gpu_present: Callable[[], bool], facefusion_python: str | None, folder: Path) -> list[Proof]:
    """Every check, the GPU ones skipped with the reason where there is no GPU."""
    gpu = check_gpu()
    if not gpu_present() or gpu.status != "proved":
        why = gpu.detail if gpu.status != "proved" else "no NVIDIA device"
        names = ("onnxruntime CUDA provider", "NVENC", "NVDEC", "warm FaceFusion engine")
        return [gpu, *(skipped(name, f"needs a GPU ({why})") for name in names)]
    return [
        gpu,
        _guarded("onnxruntime CUDA provider", lambda: check_cuda_provider(facefusion_python, folder / "standins")),
        _guarded("NVENC", lambda: check_nvenc(folder)),
        _guarded("NVDEC", lambda: check_nvdec(folder)),
        _guarded("warm FaceFusion engine", lambda: check_warm_engine(folder)),
    ]


def _guarded(name: str, check: Callable[[], Proof]) -> Proof:
    try:
        return check()
    except Exception as error:  # a check that breaks is a failed check, with its reason
        return failed(name, f"{type(error).__name__}: {error}")


def table(proofs: list[Proof]) -> str:
    width = max(len(p.check) for p in proofs)
    return "\n".join(f"{p.check:<{width}}  {p.status.upper():<8} {p.detail}" for p in proofs)


def exit_code(proofs: list[Proof], require_gpu: bool) -> int:
    if any(p.status == "failed" for p in proofs):
        return 1
    if require_gpu and any(p.status == "skipped" for p in proofs):
        return 1
    return 0


def facefusion_interpreter() -> str | None:
    from tests.support.facefusion_harness import facefusion_python

    python = facefusion_python()
    return str(python) if python.exists() else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--require-gpu", action="store_true", help="a skipped check fails the run too")
    args = parser.parse_args(argv)
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="device-check-") as folder:
        proofs = run_checks(has_nvidia_device, facefusion_interpreter(), Path(folder))
    print(table(proofs))
    code = exit_code(proofs, args.require_gpu)
    counts = {status: sum(p.status == status for p in proofs) for status in ("proved", "failed", "skipped")}
    print(
        f"\n{counts['proved']} proved, {counts['failed']} failed, {counts['skipped']} skipped"
        f" in {time.monotonic() - began:.1f} s"
    )
    return code


if __name__ == "__main__":
    sys.exit(main())

"""A GPU provider is proven at start by running a tiny model on it alone; a silent CPU fall back is refused.

The decision is a pure function (unit cases below); the probe itself runs in FaceFusion's own
environment (`.venv-facefusion`, or FUSIONFLEET_FACEFUSION_PYTHON), where onnx and onnxruntime are.
This machine has no CUDA, so asking for it shows the real refusal.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fleetctl.harness.facefusion import facefusion_python
from gpu_worker.engines.base import EngineUnavailable
from gpu_worker.engines.facefusion.host_facts import prove_provider
from gpu_worker.engines.facefusion.process import run_provider_probe
from gpu_worker.engines.facefusion.provider_proof import EXPECTED_OUTPUT, ProbeOutcome, needs_proof, proof_problem
from gpu_worker.engines.facefusion.settings import settings_from_env
from tests.support.facefusion_harness import in_ci

CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"


def test_a_session_that_kept_cuda_and_computed_right_is_proven() -> None:
    assert proof_problem(ProbeOutcome(CUDA, (CUDA, CPU), EXPECTED_OUTPUT)) is None


def test_a_session_that_fell_back_to_the_cpu_is_refused() -> None:
    problem = proof_problem(ProbeOutcome(CUDA, (CPU,), EXPECTED_OUTPUT))
    assert problem is not None and "fell back to CPUExecutionProvider" in problem


def test_a_wrong_answer_or_an_error_is_refused() -> None:
    assert "wrongly" in (proof_problem(ProbeOutcome(CUDA, (CUDA,), (0.0, 0.0, 0.0, 0.0))) or "")
    assert "libcudnn" in (proof_problem(ProbeOutcome(CUDA, (), None, "RuntimeError: libcudnn.so.9 missing")) or "")


def test_only_gpu_providers_need_proof() -> None:
    assert needs_proof(CUDA) and needs_proof("TensorrtExecutionProvider") and not needs_proof(CPU)


@pytest.fixture
def python() -> str:
    path = facefusion_python()
    if not path.exists():
        missing = f"no FaceFusion environment at {path} (make facefusion-env)"
        if in_ci():
            pytest.fail(f"CI must run FaceFusion's environment, and cannot: {missing}", pytrace=False)
        pytest.skip(missing)
    return str(path)


def test_the_cpu_runs_the_tiny_model(python: str, tmp_path: Path) -> None:
    # GIVEN FaceFusion's interpreter WHEN the probe asks for the CPU alone THEN it ran there, right
    outcome = run_provider_probe(python, tmp_path, dict(os.environ), CPU)
    assert outcome.error is None
    assert outcome.session_providers == (CPU,)
    assert proof_problem(outcome) is None


def test_cuda_on_a_machine_without_it_fails_loudly(python: str, tmp_path: Path) -> None:
    # GIVEN a machine whose onnxruntime cannot use CUDA (this one)
    # WHEN a worker configured for CUDA proves it THEN it refuses, saying it fell back
    settings = settings_from_env({"FUSIONFLEET_FACEFUSION_PYTHON": python})
    with pytest.raises(EngineUnavailable, match=r"CUDAExecutionProvider is listed but .* fell back to CPU"):
        prove_provider(settings, tmp_path, dict(os.environ), CUDA)

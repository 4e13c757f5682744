"""Whether the execution provider a worker is configured for really runs models. Pure decisions.

onnxruntime-gpu lists CUDAExecutionProvider whenever it was built with it, even when the driver,
the CUDA libraries or the device are broken; a session asked for CUDA then runs on the CPU with
only a warning. A GPU worker that rendered like that would be very slow and look healthy. So at
start the worker runs a tiny model on the provider alone (`provider_probe.py`, in FaceFusion's
interpreter) and refuses to start unless the session kept that provider and computed the right
answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpu_worker.engines.facefusion.provider_probe import PROBE_INPUT

EXPECTED_OUTPUT = tuple(value + value for value in PROBE_INPUT)
# Providers whose failure must stop the worker: the CPU needs no proof.
PROVEN = frozenset({"CUDAExecutionProvider", "TensorrtExecutionProvider"})


@dataclass(frozen=True)
class ProbeOutcome:
    requested: str
    session_providers: tuple[str, ...]
    output: tuple[float, ...] | None
    error: str | None = None


def needs_proof(provider: str) -> bool:
    return provider in PROVEN


def proof_problem(outcome: ProbeOutcome) -> str | None:
    """Why the provider cannot be trusted, or None when it ran the model itself and got it right."""
    what = f"onnxruntime's {outcome.requested}"
    if outcome.error is not None:
        return f"{what} could not run a tiny test model: {outcome.error}"
    if outcome.requested not in outcome.session_providers:
        kept = ", ".join(outcome.session_providers) or "none"
        return (
            f"{what} is listed but a session asked for it alone fell back to {kept} "
            "(CUDA driver, libraries or device not usable); refusing to render on the CPU"
        )
    if outcome.output is None or not _close(outcome.output, EXPECTED_OUTPUT):
        return f"{what} ran a tiny test model wrongly: {outcome.output} for {list(EXPECTED_OUTPUT)}"
    return None


def _close(got: Sequence[float], expected: Sequence[float]) -> bool:
    return len(got) == len(expected) and all(abs(a - b) <= 1e-4 for a, b in zip(got, expected, strict=True))

"""Runs a tiny ONNX model on one onnxruntime execution provider and reports what happened, as JSON.

Run by FaceFusion's interpreter (`python provider_probe.py CUDAExecutionProvider`): standard library,
numpy, onnx and onnxruntime only (FaceFusion 3.8.1 pins onnx itself), never the project. The model is
built here with onnx's helper, so nothing is shipped or downloaded. onnxruntime falls back to the CPU
with only a warning when it cannot use the provider asked for; the session's own provider list and the
output tell the truth, and `provider_proof.proof_problem` judges them.
"""

from __future__ import annotations

import json
import sys
from typing import Any

# y = x + x over a small vector: enough to make the provider allocate, run a kernel and copy back.
PROBE_INPUT = [1.0, 2.0, 3.0, 4.0]


def tiny_model() -> bytes:
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [len(PROBE_INPUT)])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [len(PROBE_INPUT)])
    graph = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "fusionfleet_probe", [x], [y])
    # Opset and IR version old enough for every onnxruntime FaceFusion 3.8.1 may run with.
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    return bytes(model.SerializeToString())


def probe(provider: str, device: int = 0) -> dict[str, Any]:
    outcome: dict[str, Any] = {"requested": provider, "session_providers": [], "output": None, "error": None}
    try:
        import numpy
        import onnxruntime  # type: ignore[import-not-found]  # FaceFusion's environment only

        # The provider alone (no CPU after it), on the device the worker will use.
        options = [{"device_id": str(device)}] if provider != "CPUExecutionProvider" else [{}]
        session = onnxruntime.InferenceSession(tiny_model(), providers=[provider], provider_options=options)
        outcome["session_providers"] = list(session.get_providers())
        (result,) = session.run(None, {"x": numpy.array(PROBE_INPUT, dtype=numpy.float32)})
        outcome["output"] = [float(value) for value in result]
    except Exception as error:  # reported, judged by the caller
        outcome["error"] = f"{type(error).__name__}: {error}"[:1000]
    return outcome


def main() -> None:
    provider = sys.argv[1] if len(sys.argv) > 1 else "CPUExecutionProvider"
    print(json.dumps(probe(provider, int(sys.argv[2]) if len(sys.argv) > 2 else 0)))


if __name__ == "__main__":
    main()

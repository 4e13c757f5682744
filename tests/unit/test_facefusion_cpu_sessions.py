"""The warm FaceFusion process's CPU inference sessions (gpu_worker/engines/facefusion/cpu_sessions.py): the cores
shared among the execution threads' frames, no spinning; any other session as FaceFusion makes it."""

from __future__ import annotations

import os
import sys
import types
from typing import Any

import pytest

from gpu_worker.engines.facefusion.cpu_sessions import NO_SPINNING, cpu_only, intra_op_threads, sharing_cores


class Options:
    """Stands in for onnxruntime.SessionOptions."""

    def __init__(self) -> None:
        self.intra_op_num_threads = 0
        self.entries: dict[str, str] = {}

    def add_session_config_entry(self, key: str, value: str) -> None:
        self.entries[key] = value


def test_a_session_takes_the_cores_each_execution_thread_has_to_itself() -> None:
    assert intra_op_threads(2, 2) == 1
    assert intra_op_threads(16, 4) == 4
    assert intra_op_threads(2, 8) == 1  # FaceFusion's own default on 2 cores
    assert intra_op_threads(4, 0) == 4


def test_only_sessions_on_the_cpu_alone_are_changed() -> None:
    assert cpu_only(["CPUExecutionProvider"])
    assert not cpu_only([("CUDAExecutionProvider", {"device_id": 0}), "CPUExecutionProvider"])
    assert not cpu_only([])


def test_cpu_sessions_are_created_with_the_shared_threads_and_no_spinning(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN FaceFusion's session class, and onnxruntime's options stood in for
    made: list[tuple[str, dict[str, Any]]] = []

    def session(model_path: str, *args: Any, **kwargs: Any) -> str:
        made.append((model_path, kwargs))
        return model_path

    monkeypatch.setitem(sys.modules, "onnxruntime", types.SimpleNamespace(SessionOptions=Options))
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3})
    create = sharing_cores(session, lambda: 2)
    # WHEN it creates a CPU session and a CUDA one
    create("a.onnx", providers=["CPUExecutionProvider"])
    create("b.onnx", providers=[("CUDAExecutionProvider", {"device_id": 0})])
    # THEN the CPU one has 2 threads of its own (4 cores, 2 execution threads) that do not spin
    options = made[0][1]["sess_options"]
    assert options.intra_op_num_threads == 2
    assert options.entries == dict([NO_SPINNING])
    # AND the CUDA one is created as FaceFusion asked
    assert made[1] == ("b.onnx", {"providers": [("CUDAExecutionProvider", {"device_id": 0})]})

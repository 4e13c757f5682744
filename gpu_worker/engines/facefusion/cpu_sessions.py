"""FaceFusion's inference sessions on the CPU in the warm process: the cores shared among its frames, none spinning.

FaceFusion creates each session with onnxruntime's defaults (inference_manager.create_inference_session): an
intra-op pool of a thread per core whose threads spin between operators. On the CPU its execution threads (one
frame each, `--execution-thread-count`, the cores' count on a CPU worker) already keep every core busy, so each
session's pool only competes with the other frames for the same cores, and its spinning burns them. Measured on
the chain speed benchmark (2 cores, 2 execution threads, the harness's stand-in models, 300 frame passes): the
warm process used 36-40 CPU s with the defaults and 19 s with these, at the same wall time on an idle machine and
about half of it on a loaded one; its 150 output frames were byte for byte the same. GPU providers' sessions stay
as FaceFusion makes them.

Loaded beside `warm_server.py` under FaceFusion's interpreter: standard library only, and onnxruntime (not in the
project's environment) when a session is created.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Sequence
from typing import Any

CPU_PROVIDER = "CPUExecutionProvider"
NO_SPINNING = ("session.intra_op.allow_spinning", "0")


def cpu_only(providers: Sequence[Any]) -> bool:
    """Whether a session's providers (names, or (name, options) pairs as FaceFusion gives them) are the CPU's alone."""
    names = [provider if isinstance(provider, str) else provider[0] for provider in providers]
    return bool(names) and all(name == CPU_PROVIDER for name in names)


def intra_op_threads(cores: int, execution_threads: int) -> int:
    """A session's own threads for one frame: the cores each execution thread has to itself, at least one. Pure."""
    return max(1, cores // max(1, execution_threads))


def sharing_cores(session_class: Any, execution_threads: Callable[[], int]) -> Callable[..., Any]:
    """`session_class` (onnxruntime's InferenceSession, as FaceFusion's inference_manager calls it) creating CPU
    sessions with `intra_op_threads` threads that do not spin; any other session as it was."""

    def create(model_path: str, *args: Any, **kwargs: Any) -> Any:
        providers = kwargs.get("providers")
        if args or "sess_options" in kwargs or not providers or not cpu_only(providers):
            return session_class(model_path, *args, **kwargs)
        options = importlib.import_module("onnxruntime").SessionOptions()
        options.intra_op_num_threads = intra_op_threads(len(os.sched_getaffinity(0)), execution_threads())
        options.add_session_config_entry(*NO_SPINNING)
        return session_class(model_path, sess_options=options, **kwargs)

    return create

"""The one module of this engine that starts processes: FaceFusion itself and two host probes."""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpu_worker.engines.base import EngineUnavailable
from gpu_worker.engines.facefusion import provider_probe
from gpu_worker.engines.facefusion.provider_proof import ProbeOutcome

logger = logging.getLogger(__name__)

LOG_TAIL_BYTES = 64 * 1024
PROBE_TIMEOUT_S = 60.0
STOP_GRACE_S = 10.0
PR_SET_PDEATHSIG = 1
# Loaded before any fork: the child between fork and exec should only make plain libc calls.
_LIBC = ctypes.CDLL(None, use_errno=True)
_PROVIDERS_SCRIPT = "import json, onnxruntime; print(json.dumps(list(onnxruntime.get_available_providers())))"


@dataclass(frozen=True)
class Completed:
    exit_code: int
    log: str  # the tail of FaceFusion's stdout and stderr, interleaved as it wrote them
    wall_s: float


class TimedOut(Exception):
    def __init__(self, timeout_s: float, log: str) -> None:
        super().__init__(f"did not finish within {timeout_s:.0f} s")
        self.timeout_s = timeout_s
        self.log = log


def _tail(path: Path, since: int = 0) -> str:
    with path.open("rb") as handle:
        handle.seek(0, os.SEEK_END)
        handle.seek(max(since, handle.tell() - LOG_TAIL_BYTES))
        return handle.read().decode("utf-8", errors="replace")


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """FaceFusion runs ffmpeg children of its own: stop the whole process group."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=STOP_GRACE_S)
        return
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _prepare_child() -> None:
    """Runs in FaceFusion's process between fork and exec.

    The worker's engine host ignores SIGTERM and SIGINT, and ignored signals survive exec: put them
    back. And should the engine's process be killed (-9 included), FaceFusion must not go on
    holding the GPU: it dies with it.
    """
    _LIBC.signal(signal.SIGTERM, 0)  # SIG_DFL
    _LIBC.signal(signal.SIGINT, 0)
    _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class Runner:
    """Runs one FaceFusion process at a time; `stop()` ends it from another thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None

    def run(
        self, argv: Sequence[str], cwd: Path, env: Mapping[str, str], timeout_s: float, log_path: Path
    ) -> Completed:
        logger.info("running FaceFusion (timeout %.0f s): %s", timeout_s, " ".join(argv))
        started = time.monotonic()
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                list(argv),
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_prepare_child,  # noqa: PLW1509 - plain libc calls only, see _prepare_child
            )
            with self._lock:
                self._process = process
            try:
                code = process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(process)
                raise TimedOut(timeout_s, _tail(log_path)) from None
            finally:
                if process.poll() is None:
                    _kill_group(process)
                with self._lock:
                    self._process = None
        return Completed(exit_code=code, log=_tail(log_path), wall_s=time.monotonic() - started)

    def stop(self) -> None:
        with self._lock:
            process = self._process
        if process is not None and process.poll() is None:
            _kill_group(process)


def _probe(
    argv: list[str], home: Path | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """A short probe of the host (onnxruntime, nvidia-smi): its output as text, never past PROBE_TIMEOUT_S."""
    return subprocess.run(
        argv, cwd=home, env=None if env is None else dict(env), stdin=subprocess.DEVNULL, capture_output=True,
        text=True, timeout=PROBE_TIMEOUT_S, check=False,
    )  # fmt: skip


def probe_providers(python: str, home: Path, env: Mapping[str, str]) -> tuple[str, ...]:
    """What onnxruntime reports, asked of the interpreter and folder FaceFusion runs with."""
    try:
        completed = _probe([python, "-c", _PROVIDERS_SCRIPT], home, env)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise EngineUnavailable(f"FaceFusion cannot run on this worker: {python} did not start: {error}") from None
    if completed.returncode != 0:
        last = (completed.stderr.strip().splitlines() or ["no output"])[-1]
        raise EngineUnavailable(f"FaceFusion is not installed on this worker: onnxruntime cannot be imported ({last})")
    try:
        providers = json.loads(completed.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise EngineUnavailable(f"onnxruntime's provider list could not be read: {completed.stdout!r}") from None
    return tuple(str(provider) for provider in providers)


def query_gpu_memory_mib(device: str) -> int | None:
    """Total memory of one GPU (index or UUID, as nvidia-smi names it), or None when unknown."""
    try:
        completed = _probe(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits", "-i", device])
    except (OSError, subprocess.TimeoutExpired):
        return None
    try:
        return int(completed.stdout.strip().splitlines()[0]) if completed.returncode == 0 else None
    except (IndexError, ValueError):
        return None


def run_provider_probe(python: str, home: Path, env: Mapping[str, str], provider: str, device: int = 0) -> ProbeOutcome:
    """A tiny model run on `provider` alone, on `device`, by FaceFusion's interpreter (provider_probe.py)."""
    try:
        completed = _probe([python, provider_probe.__file__, provider, str(device)], home, env)
    except (OSError, subprocess.TimeoutExpired) as error:
        return ProbeOutcome(provider, (), None, f"the probe did not finish: {error}")
    try:
        report = json.loads(completed.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        last = (completed.stderr.strip().splitlines() or ["no output"])[-1]
        return ProbeOutcome(provider, (), None, f"the probe exited with {completed.returncode}: {last}")
    output = report.get("output")
    return ProbeOutcome(
        requested=provider,
        session_providers=tuple(str(name) for name in report.get("session_providers", [])),
        output=tuple(float(value) for value in output) if output is not None else None,
        error=report.get("error"),
    )

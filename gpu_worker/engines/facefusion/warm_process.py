"""The warm FaceFusion process seen from the engine: started once, spoken to over two pipes.

Replies are read with a deadline (select on the pipe), so a hung FaceFusion ends the segment with
its last words instead of blocking the engine; `stop()` kills it from another thread.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from gpu_worker.engines.base import EngineError, EngineUnavailable
from gpu_worker.engines.facefusion import warm_server
from gpu_worker.engines.facefusion.failures import last_words
from gpu_worker.engines.facefusion.process import _kill_group, _prepare_child, _tail

logger = logging.getLogger(__name__)

SERVER_SCRIPT = Path(warm_server.__file__)
START_TIMEOUT_S = 120.0


class ServerGone(EngineError):
    """The warm process died or hung; the next segment starts a new one."""


class _Deadline:
    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.at = time.monotonic() + timeout_s

    def left(self) -> float:
        return self.at - time.monotonic()


class WarmProcess:
    """One FaceFusion process that renders segment after segment."""

    def __init__(self, python: str, home: Path, env: Mapping[str, str], log_path: Path) -> None:
        self._log_path = log_path
        self._lock = threading.Lock()
        started = time.monotonic()
        self._log = log_path.open("ab")
        self._process = subprocess.Popen(
            [python, str(SERVER_SCRIPT)],
            cwd=home,
            env={**env, "PYTHONUNBUFFERED": "1"},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            start_new_session=True,
            # Dies with the thread that starts it (PR_SET_PDEATHSIG): the engine's own, long-lived one.
            preexec_fn=_prepare_child,  # noqa: PLW1509 - plain libc calls only, see process._prepare_child
        )
        assert self._process.stdin is not None and self._process.stdout is not None
        self._requests: IO[bytes] = self._process.stdin
        self._replies: IO[bytes] = self._process.stdout
        header, _ = self.receive(_Deadline(START_TIMEOUT_S), "start")
        if header.get("op") != "started":
            self.stop()
            raise EngineUnavailable(f"FaceFusion's warm process did not start: {header}")
        self.start_s = time.monotonic() - started
        logger.info("warm FaceFusion process %s started in %.1f s", self._process.pid, self.start_s)

    @property
    def pid(self) -> int:
        return self._process.pid

    def alive(self) -> bool:
        return self._process.poll() is None

    def log_tail(self, since: int = 0) -> str:
        """The end of FaceFusion's console output, from byte `since` of it on (a segment's start)."""
        return _tail(self._log_path, since)

    def log_size(self) -> int:
        """Where FaceFusion's console output ends now: a segment's failure shows only what came after."""
        self._log.flush()
        return self._log_path.stat().st_size

    def send(self, header: dict[str, Any], payload: bytes | memoryview = b"") -> None:
        """A header and its payload (a one-dimensional byte view is written without a copy)."""
        try:
            warm_server.write_message(self._requests, header, payload)
        except (BrokenPipeError, ValueError, OSError):
            raise ServerGone(f"FaceFusion's warm process is gone: {last_words(self.log_tail())}") from None

    def _read(self, size: int, deadline: _Deadline, what: str) -> bytes:
        chunks = []
        fd = self._replies.fileno()
        while size:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline.left()))
            if not ready:
                self.stop(graceful=False)
                raise ServerGone(
                    f"FaceFusion did not answer ({what}) within {deadline.timeout_s:.0f} s and was stopped: "
                    f"{last_words(self.log_tail())}"
                )
            chunk = os.read(fd, size)
            if not chunk:
                code = self._process.wait()
                raise ServerGone(
                    f"FaceFusion's warm process exited ({code}) during {what}: {last_words(self.log_tail())}"
                )
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)

    def receive(self, deadline: _Deadline, what: str) -> tuple[dict[str, Any], bytes]:
        (size,) = warm_server.HEADER.unpack(self._read(warm_server.HEADER.size, deadline, what))
        header: dict[str, Any] = json.loads(self._read(size, deadline, what))
        payload = self._read(int(header["bytes"]), deadline, what) if header.get("bytes") else b""
        return header, payload

    def stop(self, graceful: bool = True) -> None:
        """End the process: asked to, between segments; killed, inside one (or when it will not)."""
        with self._lock:
            if self._process.poll() is None:
                if not graceful:
                    # Nothing in it is worth waiting for: no files of ours, only the GPU to free.
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(self._process.pid, signal.SIGKILL)
                    self._process.wait()
                else:
                    try:
                        warm_server.write_message(self._requests, {"op": "stop"})
                        self._process.wait(timeout=2)
                    except (OSError, ValueError, subprocess.TimeoutExpired):
                        _kill_group(self._process)
            for stream in (self._requests, self._replies):
                with contextlib.suppress(OSError):
                    stream.close()
            self._log.close()


def deadline(timeout_s: float) -> _Deadline:
    return _Deadline(timeout_s)

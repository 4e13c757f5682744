"""The one place that starts ffmpeg. Failures become MediaError carrying the tail of ffmpeg's stderr."""

from __future__ import annotations

import contextlib
import logging
import subprocess
import tempfile
from collections.abc import Sequence
from types import TracebackType

import numpy as np
import numpy.typing as npt

from fusionfleet.errors import MediaError

logger = logging.getLogger(__name__)
STDERR_TAIL = 2000


def ffmpeg_exe() -> str:
    """The static FFmpeg that ships inside imageio-ffmpeg: the same build on every host."""
    import imageio_ffmpeg

    return str(imageio_ffmpeg.get_ffmpeg_exe())


def _tail(text: str) -> str:
    text = text.strip()
    return text[-STDERR_TAIL:] if text else "(no output)"


# ffmpeg runs in a process group of its own: a SIGTERM or Ctrl-C sent to the worker's group (a
# terminal, `kill -TERM -pgid`, the chaos runs) must reach only the worker, which decides how to
# stop (a warm stop finishes the chunk in hand), not kill the encoder under it and cost an attempt.
# Should the worker die outright, the encoder sees its input pipe close and exits by itself.
OWN_GROUP = 0


def run_ffmpeg(args: Sequence[str], timeout_s: float, what: str) -> None:
    argv = [ffmpeg_exe(), *args]
    logger.debug("running %s", argv)
    try:
        completed = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout_s, check=False,
            process_group=OWN_GROUP,
        )  # fmt: skip
    except subprocess.TimeoutExpired as error:
        raise MediaError(f"{what}: ffmpeg did not finish within {timeout_s:.0f} s") from error
    if completed.returncode != 0:
        raise MediaError(f"{what}: ffmpeg exited with {completed.returncode}: {_tail(completed.stderr)}")


class FramePipe:
    """Feeds raw BGR frames to an ffmpeg process; `close()` waits for it and checks its exit status."""

    def __init__(self, args: Sequence[str], what: str, timeout_s: float) -> None:
        self._what = what
        self._timeout_s = timeout_s
        # Closed in close()/abort(): the pipe outlives this constructor by design.
        self._stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115
        self._process = subprocess.Popen(
            [ffmpeg_exe(), *args], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=self._stderr,
            process_group=OWN_GROUP,
        )  # fmt: skip
        self.frames_written = 0

    def write(self, image: npt.NDArray[np.uint8]) -> None:
        assert self._process.stdin is not None
        try:
            # The array's own buffer, not a copy of it (6 MB a frame at 1080p).
            self._process.stdin.write(np.ascontiguousarray(image).data.cast("B"))
        except BrokenPipeError as error:
            self._process.wait()
            raise MediaError(f"{self._what}: ffmpeg stopped reading frames: {self._read_stderr()}") from error
        self.frames_written += 1

    def _read_stderr(self) -> str:
        self._stderr.seek(0)
        return _tail(self._stderr.read())

    def close(self) -> None:
        if self._process.stdin is not None and not self._process.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self._process.stdin.close()
        try:
            code = self._process.wait(timeout=self._timeout_s)
        except subprocess.TimeoutExpired as error:
            self._process.kill()
            self._process.wait()
            raise MediaError(f"{self._what}: ffmpeg did not finish within {self._timeout_s:.0f} s") from error
        finally:
            stderr = self._read_stderr()
            self._stderr.close()
        if code != 0:
            raise MediaError(f"{self._what}: ffmpeg exited with {code}: {stderr}")

    def abort(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        if not self._stderr.closed:
            self._stderr.close()

    def __enter__(self) -> FramePipe:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()

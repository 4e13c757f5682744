"""A one-line progress bar for the terminal (stderr); when not a terminal, a line every few seconds."""

from __future__ import annotations

import sys
import time
from typing import TextIO


def bar(done: int, total: int, width: int = 30) -> str:
    filled = 0 if total <= 0 else round(width * min(done, total) / total)
    return "[" + "#" * filled + "-" * (width - filled) + "]"


class ProgressLine:
    def __init__(self, stream: TextIO | None = None, log_interval_s: float = 2.0) -> None:
        self._stream = stream or sys.stderr
        self._tty = self._stream.isatty()
        self._interval = log_interval_s
        self._last = ""
        self._last_time = 0.0
        self._pending = ""

    def show(self, text: str) -> None:
        if text == self._last:
            return
        now = time.monotonic()
        if not self._tty and now - self._last_time < self._interval:
            self._pending = text  # logs get a line every few seconds, and the last one at the end
            return
        self._write(text, now)

    def _write(self, text: str, now: float) -> None:
        self._last, self._last_time, self._pending = text, now, ""
        self._stream.write(("\r\033[K" + text) if self._tty else text + "\n")
        self._stream.flush()

    def done(self) -> None:
        if self._pending:
            self._write(self._pending, time.monotonic())
        if self._tty and self._last:
            self._stream.write("\n")
            self._stream.flush()
        self._last = ""

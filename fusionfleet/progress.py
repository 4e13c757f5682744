"""A one-line progress bar for the terminal (stderr), plain lines when not a terminal."""

from __future__ import annotations

import sys
from typing import TextIO


def bar(done: int, total: int, width: int = 30) -> str:
    filled = 0 if total <= 0 else round(width * min(done, total) / total)
    return "[" + "#" * filled + "-" * (width - filled) + "]"


class ProgressLine:
    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stderr
        self._tty = self._stream.isatty()
        self._last = ""

    def show(self, text: str) -> None:
        if text == self._last:
            return
        self._last = text
        if self._tty:
            self._stream.write("\r\033[K" + text)
        else:
            self._stream.write(text + "\n")
        self._stream.flush()

    def done(self) -> None:
        if self._tty and self._last:
            self._stream.write("\n")
            self._stream.flush()
        self._last = ""

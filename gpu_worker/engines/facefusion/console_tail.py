"""FaceFusion's console output in the warm process: passed on to standard error, its last lines kept.

FaceFusion says why it refused a job only on its console (a processor's pre-processing, a failed
check); the warm process answers with its last line. Standard library only: the warm process imports
it from beside itself, in FaceFusion's interpreter.
"""

from __future__ import annotations

import io
import sys
from collections import deque

LOG_TAIL: deque[str] = deque(maxlen=20)


class ConsoleTail(io.TextIOBase):
    """Standard error's stand-in: what FaceFusion writes goes on to the real one, its last lines kept."""

    def write(self, text: str) -> int:
        if sys.__stderr__ is not None:
            sys.__stderr__.write(text)
            sys.__stderr__.flush()
        LOG_TAIL.extend(line for line in text.splitlines() if line.strip())
        return len(text)


def last_log_line() -> str | None:
    return LOG_TAIL[-1] if LOG_TAIL else None

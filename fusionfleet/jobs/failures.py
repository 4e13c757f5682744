"""How a failed segment is named in causes and notices: one wording for the worker that gives up, the
dead-letter consumer and the merge gate, so a failure notice always says which segment (and frames),
after how many attempts, and why."""

from __future__ import annotations


def segment_label(index: int, start_frame: int | None = None, end_frame: int | None = None) -> str:
    """`segment 3 (frames 300-399)`; the frames are left out when unknown."""
    if start_frame is None or end_frame is None:
        return f"segment {index}"
    return f"segment {index} (frames {start_frame}-{end_frame - 1})"


def attempts_text(attempts: int) -> str:
    return f"{attempts} attempt" if attempts == 1 else f"{attempts} attempts"


def segment_failure(label: str, attempts: int, error: str, reason: str) -> str:
    """`segment 3 (frames 300-399) failed after 3 attempts: EngineCrashed: killed by signal 9`."""
    cause = f"{error}: {reason}" if error else reason
    return f"{label} failed after {attempts_text(attempts)}: {cause}"

"""Aligned plain-text tables and short human durations for the CLI. Pure."""

from __future__ import annotations

from collections.abc import Sequence


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], right: Sequence[int] = ()) -> list[str]:
    """Columns padded to their widest cell; the last column is never padded (long reasons go there).

    `right` names the columns (by position) aligned to the right, such as counts.
    """
    cells = [[str(cell) for cell in row] for row in [list(headers), *rows]]
    widths = [max(len(row[column]) for row in cells) for column in range(len(headers))]
    lines = []
    for row in cells:
        parts = []
        for column, cell in enumerate(row):
            last = column == len(row) - 1
            if column in right:
                parts.append(cell.rjust(widths[column]))
            else:
                parts.append(cell if last else cell.ljust(widths[column]))
        lines.append("  ".join(parts).rstrip())
    return lines


def duration(seconds: float) -> str:
    """`42s`, `3m05s`, `2h07m`, `3d04h`: precise enough to read at a glance."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"

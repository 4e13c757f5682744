"""FaceFusion's reason for a failed run, read from its console output. Pure functions.

FaceFusion 3.8.1 reports most failures only in its log and its exit code (core.py: 2 when its
pre-checks or argument defaults fail, 1 when a job step fails, 0 on success or on Ctrl-C), and
some not even there: when its content analyser flags the target (content_analyser.analyse_video,
more than 10 % of the sampled frames), workflows/to_video.py analyse_video returns 3, the step
fails and the process exits with 1 without a message; only the "analysing" progress bar, whose
`rate` is that percentage, shows why.
"""

from __future__ import annotations

import re

# content_analyser.analyse_video: `return bool(rate > 10.0)`.
ANALYSER_LIMIT_PERCENT = 10.0
MAX_REASON_LINES = 6
MAX_REASON_CHARS = 1500

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# A tqdm bar as FaceFusion draws them: "processing:  40%|====      | 4/10 [00:01<00:02, ...]".
_PROGRESS = re.compile(r"^(?P<desc>[a-z][a-z ]*):\s+\d+%\|")
_RATE = re.compile(r"rate=(?P<rate>[0-9.]+(?:e[+-]?\d+)?)")


def _segments(log: str) -> list[str]:
    """Console lines, with each redraw of a progress bar (carriage returns) as its own line."""
    text = _ANSI.sub("", log)
    return [segment.strip() for segment in re.split(r"[\r\n]+", text) if segment.strip()]


def progress_bars(log: str) -> list[tuple[str, str]]:
    """(description, last drawn state) of each progress bar, in order of appearance."""
    bars: list[tuple[str, str]] = []
    for segment in _segments(log):
        match = _PROGRESS.match(segment)
        if not match:
            continue
        if bars and bars[-1][0] == match["desc"]:
            bars[-1] = (match["desc"], segment)
        else:
            bars.append((match["desc"], segment))
    return bars


def analyser_rate(log: str) -> float | None:
    """The share of sampled frames (percent) FaceFusion's content analyser flagged, if it ran."""
    for desc, state in reversed(progress_bars(log)):
        if desc == "analysing":
            match = _RATE.search(state)
            return float(match["rate"]) if match else None
    return None


def analyser_refused(log: str) -> float | None:
    """The flagged rate when the analyser stopped the run (no processing bar followed it)."""
    rate = analyser_rate(log)
    if rate is None or rate <= ANALYSER_LIMIT_PERCENT:
        return None
    descriptions = [desc for desc, _ in progress_bars(log)]
    after = descriptions[len(descriptions) - descriptions[::-1].index("analysing") :]
    return None if "processing" in after else rate


def meaningful_lines(log: str) -> list[str]:
    """The last lines worth showing a user: no progress bars, no blank lines."""
    lines = [segment for segment in _segments(log) if not _PROGRESS.match(segment)]
    return lines[-MAX_REASON_LINES:]


def last_words(log: str) -> str:
    lines = meaningful_lines(log)
    if not lines:
        return "it printed nothing"
    text = " | ".join(lines)
    return text if len(text) <= MAX_REASON_CHARS else "…" + text[-MAX_REASON_CHARS:]


def failure_reason(exit_code: int, log: str) -> str:
    """Why a run that exited with `exit_code` failed, in FaceFusion's own words where it has any."""
    rate = analyser_refused(log)
    if rate is not None:
        return (
            f"FaceFusion's content analyser refused the target: it flagged {rate:g} % of the sampled frames "
            f"(its limit is {ANALYSER_LIMIT_PERCENT:g} %), so FaceFusion rendered nothing (exit code {exit_code})"
        )
    if exit_code == 2 and not meaningful_lines(log):
        return (
            "FaceFusion refused to start (exit code 2) without a message: one of its argument defaults is "
            "outside its choices (e.g. no usable execution provider or video encoder)"
        )
    return f"FaceFusion failed (exit code {exit_code}): {last_words(log)}"


def missing_output_reason(log: str) -> str:
    rate = analyser_refused(log)
    if rate is not None:
        return failure_reason(0, log)
    return f"FaceFusion exited with code 0 but wrote no output video: {last_words(log)}"


def frame_count_reason(got: int, expected: int, log: str) -> str:
    return f"FaceFusion's output has {got} frames for the {expected} it was given: {last_words(log)}"

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
# What of FaceFusion's output a failure reason carries (the attempt record, `fusionfleet logs`, the
# failure notice): its last meaningful lines, bounded, with anything that looks like a secret masked.
MAX_REASON_LINES = 20
MAX_REASON_CHARS = 2000
MASK = "***"

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# A tqdm bar as FaceFusion draws them: "processing:  40%|====      | 4/10 [00:01<00:02, ...]".
_PROGRESS = re.compile(r"^(?P<desc>[a-z][a-z ]*):\s+\d+%\|")
_RATE = re.compile(r"rate=(?P<rate>[0-9.]+(?:e[+-]?\d+)?)")
# Secrets a log line may hold: AWS key ids, presigned-URL signatures and tokens, `name=value` pairs and
# headers whose name says secret, and bearer tokens. The worker's environment is FaceFusion's too.
_SECRETS = (
    re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),
    re.compile(r"(?i)X-Amz-(?:Signature|Credential|Security-Token)(?P<sep>=)[^&\s]+"),
    re.compile(
        r"(?i)(?:secret|token|password|passwd|credential|api[_-]?key|access[_-]?key)\w*"
        r"(?P<sep>['\"]?\s*[:=]\s*['\"]?)[^\s'\",;&]+"
    ),
    re.compile(r"(?i)bearer(?P<sep>\s+)[A-Za-z0-9._~+/=-]+"),
)


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


def redact(line: str) -> str:
    """The line with anything that looks like a secret replaced by MASK."""
    for pattern in _SECRETS:
        line = pattern.sub(_masked, line)
    return line


def _masked(match: re.Match[str]) -> str:
    separator = match.groupdict().get("sep")
    if separator is None:
        return MASK
    # name=value: keep the name and the separator, so the line still says what was there.
    start = match.start("sep") - match.start()
    return match.group(0)[: start + len(separator)] + MASK


def meaningful_lines(log: str) -> list[str]:
    """The last lines worth showing a user: no progress bars, no blank lines, no secrets."""
    lines = [segment for segment in _segments(log) if not _PROGRESS.match(segment)]
    return [redact(line) for line in lines[-MAX_REASON_LINES:]]


def last_words(log: str) -> str:
    lines = meaningful_lines(log)
    if not lines:
        return "it printed nothing"
    text = " | ".join(lines)
    return text if len(text) <= MAX_REASON_CHARS else "…" + text[-MAX_REASON_CHARS:]


def with_output(reason: str, log: str) -> str:
    """`reason` followed by FaceFusion's last words, where it said more than the reason already does."""
    lines = [line for line in meaningful_lines(log) if line not in reason]
    return f"{reason}; FaceFusion's last output: {last_words(chr(10).join(lines))}" if lines else reason


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


# What FaceFusion 3.8.1's processors log when their pre-processing refuses the job's own inputs
# (face_swapper: its source images hold no face under the job's detector options). Every worker
# would refuse alike, so such a run is the user's to fix, not a worker's fault to retry.
_INPUT_REFUSALS = ("no source face detected",)


def input_refusal(log: str) -> str | None:
    """FaceFusion's reason when it refused the job's inputs, else None."""
    lines = meaningful_lines(log)
    if not any(refusal in line.lower() for line in lines for refusal in _INPUT_REFUSALS):
        return None
    return f"FaceFusion refused the job's inputs: {last_words(log)}"


def missing_output_reason(log: str) -> str:
    rate = analyser_refused(log)
    if rate is not None:
        return failure_reason(0, log)
    return f"FaceFusion exited with code 0 but wrote no output video: {last_words(log)}"


def frame_count_reason(got: int, expected: int, log: str) -> str:
    return f"FaceFusion's output has {got} frames for the {expected} it was given: {last_words(log)}"

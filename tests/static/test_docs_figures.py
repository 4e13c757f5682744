"""Every figure the docs quote from a benchmark is traced to its results file.

A page names the results file a figure comes from (`benchmarks/results/<name>.json`, or just
`<name>.json`); from there to the end of its section (a heading, or a paragraph that opens with a bold
title, starts the next), every number in the text is a figure of the files named so far and must be
one of their values, at the precision quoted (a percentage may be a share ×100, minutes and hours may
be seconds, milliseconds may be seconds). A table row is checked against the files named before the
table and in the row itself. Code (`…`), link targets, versions (3.8.1), hyphenated words (68-point)
and long digit strings (commits) are not figures.

A figure worked out from the file's values (a ratio, a difference) is listed in DERIVED with how: the
test works it out again from the file. A number that is a fact rather than a measurement (the
machine's limit, a setting named beside a figure) is listed in NOT_FIGURES with why. Nothing else may
be quoted where a results file is named: a figure that traces to nothing is stale or invented.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FILE = re.compile(r"([A-Za-z0-9_.-]+\.json)")
# A figure: digits with a decimal part or not, not inside a word, a version, a path or a frame size (1920×1080).
NUMBER = re.compile(r"(?<![\w.\-/×])(\d+(?:\.\d+)?)(?![\w]|\.\d|-[A-Za-z]|×\d)")
# The second figure of a range or a pair ("95 to 98 %", "0.62–0.63 GB", "1.29 / 1.93 GB") lends the first its unit.
RANGE = re.compile(r"\s*(?:to|–|/)\s*\d+(?:\.\d+)?")


@dataclass(frozen=True)
class Figure:
    page: str
    line: int
    text: str  # as quoted
    unit: str  # the few characters after it
    files: tuple[str, ...]
    context: str


@dataclass(frozen=True)
class Derived:
    page: str
    text: str
    file: str
    value: Callable[[Any], float]
    how: str


def _runs(data: Any, name: str) -> Any:
    return data["speedup"]["runs"][name]


def _clip(data: Any, size: str) -> Any:
    return next(clip for clip in data["clips"] if clip["size"] == size)


def _perfect_render_speedup(data: Any) -> float:
    one = _runs(data, "1")
    return float(one["end_to_end_s"] / (one["end_to_end_s"] - one["render_wall_s"] / 2))


# Figures worked out from a results file's values; the test works each out again.
DERIVED = (
    Derived("scheduling.md", "7.2", "scaling.json",
            lambda d: _runs(d, "1")["end_to_end_s"] - _runs(d, "1")["render_wall_s"],
            "the one-worker run's end to end less its render phase: what a second worker does not share"),
    Derived("scheduling.md", "1.65", "scaling.json",
            _perfect_render_speedup,
            "the speed-up a perfect 2x on the render phase would give"),
    Derived("scheduling.md", "1.55", "scaling.json",
            lambda d: _runs(d, "1")["render_wall_s"] / _runs(d, "2 sized plan")["render_wall_s"],
            "the render phase's speed-up with the sized plan"),
    Derived("occupancy.md", "1.14", "occupancy-run6.json",
            lambda d: _clip(d, "1920x1080")["render_s"] / _clip(d, "1920x1080")["cpu_floor_s"],
            "the 1080p render phase over its CPU floor (the worker's CPU time spread over the cores)"),
    Derived("scheduling.md", "1.36", "scaling.json",
            lambda d: _runs(d, "1")["render_wall_s"] / _runs(d, "2 fixed plan")["render_wall_s"],
            "the render phase's speed-up with the fixed plan"),
)  # fmt: skip
# Numbers beside figures that are not measurements.
NOT_FIGURES = {
    ("operations.md", "32768"): "this machine's pid_max, a setting of the kernel",
    ("occupancy.md", "80"): "FaceFusion's default output quality, a setting named beside the encoder's figures",
}


def _blocks(text: str) -> Iterator[tuple[int, str]]:
    """(first line, block) for each paragraph, and for each row of a table; code fences left out."""
    text = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    line = 1
    for block in re.split(r"(\n\s*\n)", text):
        if block.strip():
            rows = block.split("\n")
            if rows[0].lstrip().startswith("|"):
                for offset, row in enumerate(rows):
                    yield line + offset, "\n" + row if offset else row
            else:
                yield line, block
        line += block.count("\n")


def figures(page: Path, results: Path = RESULTS) -> list[Figure]:
    """Every number quoted where a results file of `results` is named, with the files it must come from."""
    found: list[Figure] = []
    names = {path.name for path in results.glob("*.json")}
    section: list[str] = []
    table: list[str] | None = None  # the files before the table the rows are in
    for line, block in _blocks(page.read_text()):
        stripped = block.strip()
        if stripped.startswith("#") or stripped.startswith("**"):
            section = []
        named = [name for name in FILE.findall(block) if name in names]
        is_row = stripped.startswith("|")
        if not is_row:
            table = None
            section += [name for name in named if name not in section]
            files = list(section)
        else:
            # A table's files: those named before it and in its header row; a row may name more.
            table = list(section) + [name for name in named if name not in section] if table is None else table
            files = table + [name for name in named if name not in table]
        if not files:
            continue
        text = re.sub(r"`[^`]*`", lambda m: " " * len(m.group(0)), block)
        text = re.sub(r"\]\([^)]*\)", lambda m: " " * len(m.group(0)), text)
        for match in NUMBER.finditer(text):
            quoted = match.group(1)
            if len(quoted.replace(".", "")) >= 7:
                continue  # an identifier (a commit), not a figure
            after = match.end()
            ranged = RANGE.match(text, after)
            unit = text[(ranged.end() if ranged else after) :][:6].strip()
            at = line + text[: match.start()].count("\n")
            context = " ".join(text[max(0, match.start() - 50) : match.end() + 20].split())
            found.append(Figure(page.name, at, quoted, unit, tuple(files), context))
    return found


def _numbers(value: Any, into: list[float]) -> None:
    if isinstance(value, bool):
        return
    if isinstance(value, int | float):
        if math.isfinite(value):
            into.append(float(value))
    elif isinstance(value, str):
        into.extend(float(number) for number in re.findall(r"\d+(?:\.\d+)?", value))
    elif isinstance(value, dict):
        for item in value.values():
            _numbers(item, into)
    elif isinstance(value, list):
        into.append(float(len(value)))
        for item in value:
            _numbers(item, into)


@cache
def _values(name: str) -> tuple[float, ...]:
    found: list[float] = []
    _numbers(json.loads((RESULTS / name).read_text()), found)
    return tuple(found)


def _same(quoted: str, value: float) -> bool:
    """Whether `value` reads as `quoted` at the precision quoted."""
    decimals = len(quoted.split(".")[1]) if "." in quoted else 0
    return bool(abs(value - float(quoted)) <= 0.5 * 10.0**-decimals + 1e-9)


def traced(figure: Figure) -> bool:
    scales = [1.0]
    if figure.unit.startswith("%"):
        scales.append(100.0)
    if figure.unit.startswith("min"):
        scales.append(1 / 60)
    if figure.unit.startswith("h") and not figure.unit.startswith("ho"):
        scales.append(1 / 3600)
    if figure.unit.startswith("ms"):
        scales.append(1000.0)
    if figure.unit.startswith("GB"):
        scales.append(1 / 1000)  # the files keep megabytes
    return any(
        _same(figure.text, value * scale) for name in figure.files for value in _values(name) for scale in scales
    )


def _derived(figure: Figure) -> Derived | None:
    for item in DERIVED:
        if (item.page, item.text) == (figure.page, figure.text) and item.file in figure.files:
            return item
    return None


def test_the_scanner_finds_figures_and_leaves_versions_words_and_code_alone(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# Run\n\nLast run (`x.json`, LocalStack 2026.3.0): p95 **29.0 s**, a 68-point model, 12.4 → 13.2 s,\n"
        "commit 9339933, `--workers 3`, 1920×1080 frames, 4.33× the floor, 95 to 98 %.\n\n"
        "| a | b (`y.json`) |\n| --- | --- |\n| 6 of 6 | 0.3 % |\n\n## Next\n\n7 s\n"
    )
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "x.json").write_text("{}")
    (tmp_path / "results" / "y.json").write_text("{}")
    found = figures(page, tmp_path / "results")
    assert [figure.text for figure in found] == ["29.0", "12.4", "13.2", "4.33", "95", "98", "6", "6", "0.3"]
    assert found[4].unit.startswith("%")  # a range's first figure takes its unit
    # AND a file named in a table's header row is a source of every row
    assert found[-1].files == ("x.json", "y.json")


def test_a_figure_is_traced_at_its_precision_and_unit() -> None:
    def figure(text: str, unit: str = "s") -> Figure:
        return Figure("p.md", 1, text, unit, ("soak.json",), "")

    assert traced(figure("29.0")) and not traced(figure("29.7"))
    assert traced(Figure("p.md", 1, "3.3", "GB", ("occupancy-run3.json",), ""))  # 3322 MB in the file
    assert _same("18.4", 1104.0 / 60) and _same("0.85", 0.846) and not _same("0.84", 0.846)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_figure_quoted_from_a_results_file_is_in_it(page: Path) -> None:
    untraced = []
    for figure in figures(page):
        if (figure.page, figure.text) in NOT_FIGURES:
            continue
        derived = _derived(figure)
        if derived is not None:
            data = json.loads((RESULTS / derived.file).read_text())
            assert _same(figure.text, derived.value(data)), f"{figure}: {derived.how} gives {derived.value(data)}"
            continue
        if not traced(figure):
            untraced.append(f"{figure.page}:{figure.line}: {figure.text} {figure.unit!r} not in {figure.files}: "
                            f"…{figure.context}…")  # fmt: skip
    assert untraced == [], "figures that trace to no results file:\n" + "\n".join(untraced)


def test_the_derived_figures_and_the_facts_are_still_quoted() -> None:
    quoted = {(figure.page, figure.text) for page in PAGES for figure in figures(page)}
    stale = [f"{item.page}: {item.text}" for item in DERIVED if (item.page, item.text) not in quoted]
    stale += [f"{page}: {text}" for page, text in NOT_FIGURES if (page, text) not in quoted]
    assert stale == [], f"listed here but no longer quoted: {stale}"

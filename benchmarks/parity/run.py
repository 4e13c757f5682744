"""One parity case: FaceFusion's own render, the farm's render, the judge's verdict, as one outcome."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmarks.parity import reference
from benchmarks.parity.alpha import compare_alpha
from benchmarks.parity.farm import Farm, FarmRun
from benchmarks.parity.judge import Layout, Verdict, judge
from fleetctl.harness.facefusion import Harness


@dataclass(frozen=True)
class Case:
    name: str
    options: dict[str, Any]
    facefusion_options: dict[str, Any] = field(default_factory=dict)  # FaceFusion's own run only
    segments: int = 3  # the farm cuts the job into exactly this many (its manifest's plan)
    note: str = ""  # why the case is there, or why it differs on purpose
    cut_at: tuple[int, ...] = ()  # or: the target frames the farm's segments start at (beside the first)

    @property
    def plan(self) -> dict[str, Any]:
        return {"cut_at": list(self.cut_at)} if self.cut_at else {"segments": self.segments}

    @property
    def wanted_segments(self) -> int:
        return len(self.cut_at) + 1 if self.cut_at else self.segments


@dataclass
class Outcome:
    case: Case
    verdict: Verdict | None = None
    farm: FarmRun | None = None
    facefusion_error: str = ""
    facefusion_s: float = 0.0
    problems: list[str] = field(default_factory=list)  # beyond the judge's: refusals, too few segments

    @property
    def unrendered(self) -> bool:
        return self.verdict is None

    @property
    def differences(self) -> list[str]:
        return [*self.problems, *(self.verdict.differences if self.verdict else [])]

    @property
    def equal(self) -> bool:
        return self.verdict is not None and not self.differences

    def line(self) -> dict[str, Any]:
        """The tool's last line: the verdict's numbers, every difference in words, and how it was made."""
        verdict = self.verdict
        return {
            "equal": self.equal,
            "frames": verdict.frames if verdict else [],
            "min_psnr": verdict.min_psnr if verdict else None,
            "audio": verdict.audio if verdict else {},
            "differences": self.differences,
            "kinds": [{"kind": item.kind, "value": item.value} for item in verdict.found] if verdict else [],
            "content": verdict.content if verdict else {},
            "case": self.case.name,
            "median_psnr": verdict.median_psnr if verdict else None,
            "worst_frames": verdict.worst_frames if verdict else [],
            "size": verdict.size if verdict else [],
            "duration_s": verdict.duration_s if verdict else [],
            "colour": verdict.colour if verdict else [],
            "segments": self.farm.segments if self.farm else 0,
            "farm_status": self.farm.status if self.farm else "",
            "facefusion_s": round(self.facefusion_s, 1),
            "farm_s": round(self.farm.wall_s, 1) if self.farm else None,
        }

    def account(self) -> str:
        line = self.line()
        only = f", FaceFusion only {self.case.facefusion_options}" if self.case.facefusion_options else ""
        said = [
            f"case {self.case.name}: {'EQUAL' if self.equal else 'NOT EQUAL'}",
            f"  options {self.case.options}{only}",
            f"  frames (FaceFusion, farm) {line['frames']}, PSNR min {line['min_psnr']}"
            f" median {line['median_psnr']} dB, farm segments {line['segments']},"
            f" FaceFusion {line['facefusion_s']} s, farm {line['farm_s']} s",
        ]
        said += [f"  - {difference}" for difference in self.differences]
        return "\n".join(said)


def render_facefusion(
    outcome: Outcome, harness: Harness, sources: Sequence[Path], target: Path, folder: Path
) -> Path | None:
    """FaceFusion's own render of the outcome's case into `folder`, its time noted; None when it failed
    (the failure noted as a problem)."""
    ours = folder / f"facefusion{target.suffix}"
    case = outcome.case
    try:
        outcome.facefusion_s = reference.render(
            harness, sources, target, ours, case.options, case.facefusion_options
        ).wall_s
    except reference.ReferenceFailed as error:
        outcome.facefusion_error = str(error)
        outcome.problems.append(f"FaceFusion's own run failed: {error}")
        return None
    return ours


def run_case(
    case: Case,
    harness: Harness,
    farm: Farm,
    sources: Sequence[Path],
    target: Path,
    work: Path,
    layout: Layout | None = None,
) -> Outcome:
    """Render `target` both ways and judge; a side that cannot render is said, never raised.

    `layout`: where the harness drew its people in the target (the judge then reads every face's code
    and colour); its first frame is moved to the case's trim start. Kept beside the renders.

    The farm goes first: a job it refuses (at once, at validation) leaves nothing to compare, and
    FaceFusion's run is then skipped.
    """
    outcome = Outcome(case)
    folder = work / case.name
    folder.mkdir(parents=True, exist_ok=True)
    theirs = folder / f"farm{target.suffix}"
    run = farm.render(sources, target, case.options, theirs, name=case.name, plan=case.plan)
    outcome.farm = run
    if run.status != "succeeded":
        outcome.problems.append(f"the farm's job {run.status}: {run.reason}")
        return outcome
    if run.segments != case.wanted_segments:
        outcome.problems.append(f"the farm cut it into {run.segments} segments, not the {case.wanted_segments} asked")
    ours = render_facefusion(outcome, harness, sources, target, folder)
    if ours is None:
        return outcome
    assert run.output is not None
    if layout is not None:
        layout = replace(layout, first=int(case.options.get("trim_frame_start") or 0))
        (folder / "layout.json").write_text(json.dumps(layout.to_json()))
    outcome.verdict = judge(ours, run.output, layout)
    # The judge reads colour; background_remover's matte, where a VP9 output keeps it, is compared here.
    outcome.problems += compare_alpha(ours, run.output)
    return outcome

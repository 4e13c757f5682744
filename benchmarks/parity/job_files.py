"""Parity for FaceFusion job files: FaceFusion's own `job-run` of a remix chain against the farm's one render.

FaceFusion's side is its own job commands in the harness's folder, nothing of ours: `job-create`,
`job-add-step` (step 1, on the target), `job-remix-step` (each later step, on the one before's output),
`job-submit`, `job-run`. The farm's side reads the job file FaceFusion wrote as `submit --facefusion-job`
reads it (fusionfleet.facefusion.job_file: `read_job_file`, `chain_as_faces`) and drops the job it makes
(one job of chained passes on the first step's target, its `faces` one mapping a step, with the step's own
options where the steps' differ) on the local farm.
The judge compares the last step's output with the farm's, frame by frame.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.parity.farm import Farm
from benchmarks.parity.judge import Layout, judge
from benchmarks.parity.reference import LOG_TAIL, TIMEOUT_S, ReferenceFailed, flags
from benchmarks.parity.run import Case, Outcome
from fleetctl.harness.facefusion import Harness
from fusionfleet.facefusion.job_file import chain_as_faces, chain_refusal, read_job_file

JOB_ID = "parity-chain"


@dataclass(frozen=True)
class Step:
    """One step of the job: its sources (files) and its options, in FaceFusion's names."""

    sources: tuple[Path, ...]
    options: Mapping[str, Any]


@dataclass(frozen=True)
class JobRun:
    job_file: bytes  # as FaceFusion's job commands wrote it, before job-submit moved it
    output: Path  # the last step's output_path
    wall_s: float  # job-run alone


def _facefusion(harness: Harness, *argv: str) -> str:
    done = subprocess.run(
        [harness.python, "facefusion.py", *argv], cwd=harness.home, env=harness.env, capture_output=True,
        text=True, timeout=TIMEOUT_S, check=False,
    )  # fmt: skip
    log = (done.stdout + done.stderr)[-LOG_TAIL:]
    if done.returncode != 0:
        raise ReferenceFailed(f"facefusion.py {argv[0]} exited with {done.returncode}: {log.strip()[-800:]}")
    return log


def job_run(harness: Harness, steps: Sequence[Step], target: Path, folder: Path) -> JobRun:
    """FaceFusion's own job of `steps` (step 1 added, each later one a remix of the one before), run."""
    with tempfile.TemporaryDirectory(prefix="parity-job-") as scratch:
        jobs, temp = Path(scratch) / "jobs", Path(scratch) / "temp"
        temp.mkdir()
        where = ["--jobs-path", str(jobs)]
        _facefusion(harness, "job-create", JOB_ID, *where)
        for index, step in enumerate(steps):
            output = str(folder / f"facefusion-step-{index}{target.suffix}")
            paths = ["-s", *map(str, step.sources), "-o", output]
            if index == 0:
                _facefusion(harness, "job-add-step", JOB_ID, *paths, "-t", str(target), *flags(step.options), *where)
            else:
                _facefusion(harness, "job-remix-step", JOB_ID, str(index - 1), *paths, *flags(step.options), *where)
        written = (jobs / "drafted" / f"{JOB_ID}.json").read_bytes()
        _facefusion(harness, "job-submit", JOB_ID, *where)
        began = time.monotonic()
        _facefusion(harness, "job-run", JOB_ID, *where, "--temp-path", str(temp), "--execution-providers", "cpu")
        wall_s = time.monotonic() - began
    return JobRun(written, folder / f"facefusion-step-{len(steps) - 1}{target.suffix}", wall_s)


def farm_job(job_file: bytes) -> tuple[list[Path], dict[str, Any], list[dict[str, Any]]]:
    """The farm's job for the job file's last step, as `submit --facefusion-job` makes it: its sources, its
    options and its `faces` (sources as indices); ReferenceFailed where its chain is not passes."""
    job = read_job_file(job_file, JOB_ID)
    chained = chain_as_faces(job, job.steps[-1])
    if chained is None:
        why = chain_refusal(job, job.steps[-1])
        raise ReferenceFailed(f"the job file's chain is not passes ({why}): the farm runs it as successive jobs")
    sources: list[Path] = []
    faces: list[dict[str, Any]] = []
    for person in chained.people:
        own = {} if person.options is None else {"options": dict(person.options)}  # a step's own options
        faces.append({"source": list(range(len(sources), len(sources) + len(person.sources))),
                      "reference_frame": person.frame, "reference_face_position": person.position, **own})  # fmt: skip
        sources.extend(Path(source) for source in person.sources)
    return sources, dict(chained.options), faces


def run_job_case(
    name: str, harness: Harness, farm: Farm, steps: Sequence[Step], target: Path, work: Path,
    layout: Layout | None = None, segments: int = 3,
) -> Outcome:  # fmt: skip
    """FaceFusion's job-run of the chain, then the farm's render of the same job file, judged."""
    folder = work / name
    folder.mkdir(parents=True, exist_ok=True)
    outcome = Outcome(Case(name=name, options={}, segments=segments))
    try:
        made = job_run(harness, steps, target, folder)
        sources, options, faces = farm_job(made.job_file)
    except ReferenceFailed as error:
        outcome.facefusion_error = str(error)
        outcome.problems.append(str(error))
        return outcome
    outcome.facefusion_s = made.wall_s
    outcome.case = Case(name=name, options=options, segments=segments)
    run = farm.render(sources, target, options, folder / f"farm{target.suffix}", name=name,
                      plan={"segments": segments}, faces=faces)  # fmt: skip
    outcome.farm = run
    if run.status != "succeeded" or run.output is None:
        outcome.problems.append(f"the farm's job {run.status}: {run.reason}")
        return outcome
    if run.segments != segments:
        outcome.problems.append(f"the farm cut it into {run.segments} segments, not the {segments} asked")
    outcome.verdict = judge(made.output, run.output, layout)
    return outcome

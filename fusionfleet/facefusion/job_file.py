"""A job file written by FaceFusion 3.8.1's own job commands, read as the farm's jobs: one per step.

FaceFusion's `job-create`, `job-add-step` and `job-remix-step` write `{version, date_created, date_updated,
steps: [{args, status}]}` (its `jobs/job_manager.py`); each step's `args` are the step's paths
(`source_paths`, `target_path`, `output_path`) and every processing option FaceFusion registers as a step
key, unset ones as null. Its `job-run` renders the steps in order, each to a file of its own
(`<output>-<job id>-<step><ext>`, `jobs/job_helper.get_step_output_path`), then gives each `output_path`
the steps that name it: one step's file moved there, several steps' videos joined (`job_runner.py`).

A remix step (`job-remix-step JOB K`) is a step whose `target_path` is that per-step file of step K. The
job file does not hold its own id (it is the file's name), so a remix is known by the per-step file's
name with the file's stem as the id, and, for a renamed file, by its shape: step K's output folder, its
name, `-<anything>-K`, its extension.

`read_job_file` reads the bytes into steps and refuses, with one sentence each, whatever the farm would
not do as FaceFusion does: see docs/engines.md's mapping table. Steps naming one output are read as they
are (`JobFile.joins`); joining their outputs is the caller's, which has them. Each step's options go through the same
validation as any job's (`fusionfleet.facefusion.options.validate_options`); the manifest's and the
engine's checks are the caller's, which knows the engine. `chain_as_faces` reads a remix chain as one job
of chained passes (`faces`, one mapping a step, each with the step's own options where steps differ);
`chain_refusal` says why a chain cannot be one. Pure: no I/O.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from fusionfleet.errors import JobRejected
from fusionfleet.facefusion.catalogue import DEFAULTS
from fusionfleet.facefusion.options import OptionsError, validate_options
from fusionfleet.jobs.faces import MAX_FACES

JOB_FILE_VERSION = "1"  # what FaceFusion 3.8.1's create_job writes
JOB_FIELDS = ("version", "date_created", "date_updated", "steps")
STEP_FIELDS = ("args", "status")
STEP_STATUSES = ("drafted", "queued", "started", "completed", "failed")  # FaceFusion's job_step_statuses
PATH_ARGS = ("source_paths", "target_path", "output_path")
MAX_JOB_FILE_BYTES = 4 * 1024 * 1024
MAX_STEPS = 100
# What a remix step may change and still be a pass of one farm job with `faces`: whose face, on whom.
PERSON_OPTIONS = ("reference_frame_number", "reference_face_position")
# Options whose effect a remix applies again to the step before's output (a trim of the trimmed video, a
# scale or rate of the scaled one). Trims compose into the job's one range; a chain that scales or re-times
# between steps stays successive jobs.
TRIM_OPTIONS = ("trim_frame_start", "trim_frame_end")
CHAIN_SIZE_OPTIONS = ("output_video_scale", "output_video_fps")
REAPPLIED_OPTIONS = (*TRIM_OPTIONS, *CHAIN_SIZE_OPTIONS)


@dataclass(frozen=True)
class JobFileStep:
    """One step of a job file as a farm job: its local paths as written, its validated options.

    `remix_of`: the step whose output is this step's target (FaceFusion's job-remix-step); its `target`
    is then that step's per-step file as FaceFusion named it, which the farm never writes."""

    index: int
    sources: tuple[str, ...]
    target: str
    output: str
    options: Mapping[str, object]
    remix_of: int | None = None


@dataclass(frozen=True)
class JobFile:
    job_id: str
    steps: tuple[JobFileStep, ...]

    @property
    def remixes(self) -> bool:
        return any(step.remix_of is not None for step in self.steps)

    @property
    def joins(self) -> dict[str, tuple[int, ...]]:
        """Each output_path several steps name, with those steps in order: FaceFusion's job-run joins their
        videos into it, one after another (its `concat_video`, a stream copy)."""
        steps_of: dict[str, list[int]] = {}
        for step in self.steps:
            steps_of.setdefault(step.output, []).append(step.index)
        return {output: tuple(indexes) for output, indexes in steps_of.items() if len(indexes) > 1}

    def root(self, step: JobFileStep) -> JobFileStep:
        """The step whose target a step's renders start from: itself, or the step a remix chain starts at."""
        while step.remix_of is not None:
            step = self.steps[step.remix_of]
        return step


def step_output_path(job_id: str, step_index: int, output_path: str) -> str | None:
    """The file FaceFusion's job-run writes a step to before its output is made (None: no file name)."""
    folder, name = posixpath.split(output_path)
    stem, extension = posixpath.splitext(name)
    if not stem or not extension:
        return None
    return posixpath.join(folder, f"{stem}-{job_id}-{step_index}{extension}")


def _remix_of(target: str, outputs: list[str], job_id: str) -> int | None:
    """The earlier step whose per-step file `target` names: by the job's id, else by its shape."""
    for index, output in enumerate(outputs):
        if target == step_output_path(job_id, index, output):
            return index
    for index, output in enumerate(outputs):
        folder, name = posixpath.split(output)
        stem, extension = posixpath.splitext(name)
        pattern = re.escape(posixpath.join(folder, stem)) + r"-.+-" + str(index) + re.escape(extension)
        if stem and extension and re.fullmatch(pattern, target):
            return index
    return None


def _refuse(problems: list[str]) -> JobRejected:
    head = "the FaceFusion job file cannot run on the farm: " + "; ".join(problems[:10])
    return JobRejected(head + (f"; and {len(problems) - 10} more" if len(problems) > 10 else ""), tuple(problems))


def _load(raw: bytes) -> dict[str, object]:
    if len(raw) > MAX_JOB_FILE_BYTES:
        raise _refuse([f"the job file is {len(raw)} bytes, over the limit of {MAX_JOB_FILE_BYTES}"])
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise _refuse([f"the job file is not UTF-8 text: {error.reason} at byte {error.start}"]) from error
    except json.JSONDecodeError as error:
        raise _refuse([f"the job file is not JSON: {error.msg} at line {error.lineno} column {error.colno}"]) from error
    if not isinstance(data, dict):
        raise _refuse([f"the job file must be a JSON object, not {type(data).__name__}"])
    return data


def _job_problems(data: Mapping[str, object]) -> list[str]:
    problems = [
        f"{name}: unknown field (FaceFusion's job files hold {', '.join(JOB_FIELDS)})"
        for name in data
        if name not in JOB_FIELDS
    ]
    if data.get("version") != JOB_FILE_VERSION:
        problems.append(
            f"version: {data.get('version')!r} is not FaceFusion 3.8.1's job file version {JOB_FILE_VERSION!r}"
        )
    steps = data.get("steps")
    if not isinstance(steps, list) or not steps:
        problems.append("steps: a job needs at least one step (FaceFusion's job-submit refuses one without)")
    elif len(steps) > MAX_STEPS:
        problems.append(f"steps: {len(steps)} steps, more than {MAX_STEPS}")
    return problems


def _path(args: Mapping[str, object], name: str, where: str, problems: list[str]) -> str:
    value = args.get(name)
    if isinstance(value, str) and value:
        return value
    what = "is not set" if value is None or value == "" else f"must be a path, not {type(value).__name__}"
    problems.append(f"{where}.{name} {what}: the farm renders a step from a target to an output file")
    return ""


def _sources(args: Mapping[str, object], where: str, problems: list[str]) -> tuple[str, ...]:
    value = args.get("source_paths")
    if isinstance(value, list) and value and all(isinstance(item, str) and item for item in value):
        return tuple(str(item) for item in value)
    if value is None or value == []:
        problems.append(
            f"{where}.source_paths is not set: every farm job names its sources (a face image, and at most one "
            "audio file for the lip syncer)"
        )
    else:
        problems.append(f"{where}.source_paths must be a list of paths")
    return ()


def _options(args: Mapping[str, object], where: str, problems: list[str]) -> dict[str, object]:
    """The step's options, validated as a manifest's are; null (FaceFusion's unset) left out."""
    given = {name: value for name, value in args.items() if name not in PATH_ARGS and value is not None}
    try:
        return validate_options(given)
    except OptionsError as error:
        problems.extend(f"{where}.{problem.removeprefix('options.')}" for problem in error.problems)
        return {}


def read_job_file(raw: bytes, job_id: str) -> JobFile:
    """The job file's steps, or JobRejected naming every problem (each `steps[N].args.NAME: why`).

    `job_id`: FaceFusion's id of the job, the file's name without `.json` (remix steps name it)."""
    data = _load(raw)
    problems = _job_problems(data)
    steps = data.get("steps")
    if not isinstance(steps, list):
        raise _refuse(problems)
    outputs = [_output_of(step) for step in steps[:MAX_STEPS]]
    found: list[JobFileStep] = []
    for index, step in enumerate(steps[:MAX_STEPS]):
        where = f"steps[{index}]"
        if not isinstance(step, dict) or not isinstance(step.get("args"), dict):
            problems.append(f"{where}: must be an object with `args` (an object) and `status`")
            continue
        problems.extend(f"{where}.{name}: unknown field" for name in step if name not in STEP_FIELDS)
        if step.get("status") not in STEP_STATUSES:
            problems.append(f"{where}.status: {step.get('status')!r} is not one of {', '.join(STEP_STATUSES)}")
        args: dict[str, object] = step["args"]
        where_args = f"{where}.args"
        sources = _sources(args, where_args, problems)
        target = _path(args, "target_path", where_args, problems)
        output = _path(args, "output_path", where_args, problems)
        if output and step_output_path(job_id, index, output) is None:
            problems.append(f"{where_args}.output_path: {output!r} must name a file with an extension")
        options = _options(args, where_args, problems)
        remix = _remix_of(target, outputs, job_id) if target else None
        if remix is not None and remix >= index:
            problems.append(
                f"{where_args}.target_path: {target!r} is the output of step {remix}, which does not run before "
                "this one (FaceFusion's job-run would not find it either)"
            )
        found.append(JobFileStep(index, sources, target, output, MappingProxyType(options), remix))
    if problems:
        raise _refuse(problems)
    return JobFile(job_id, tuple(found))


def _output_of(step: object) -> str:
    """A step's output path as far as it can be read ("" where it cannot; its step reports why)."""
    args = step.get("args") if isinstance(step, dict) else None
    value = args.get("output_path") if isinstance(args, dict) else None
    return value if isinstance(value, str) else ""


def without_defaults(options: Mapping[str, object], keep: frozenset[str]) -> dict[str, object]:
    """The options less those set to FaceFusion's own default, except the names in `keep`.

    A job file carries every option FaceFusion registers, at its default where the user set none; an engine
    other than FaceFusion is given only what the user chose (and `keep`: what it applies itself)."""

    def default(name: str, value: object) -> bool:
        wanted = DEFAULTS.get(name)
        return wanted is not None and (list(wanted) if isinstance(wanted, tuple) else wanted) == value

    return {name: value for name, value in options.items() if name in keep or not default(name, value)}


@dataclass(frozen=True)
class ChainedPerson:
    """One step of a remix chain as a mapping of `faces`: its sources, on the face at `position` of frame
    `frame` of the ORIGINAL target (a trim of a step before moved the step's own numbering by its start), and
    the step's own options where the chain's steps differ (None: the job's)."""

    sources: tuple[str, ...]
    frame: int
    position: int
    options: Mapping[str, object] | None = None


@dataclass(frozen=True)
class ChainAsFaces:
    """A remix chain rendered as one farm job: the first step's target, the job's options, and one person per
    step in order (the facefusion engine's chained passes, gpu_worker/engines/facefusion/chain.py)."""

    steps: tuple[int, ...]
    target: str
    options: Mapping[str, object]
    people: tuple[ChainedPerson, ...]


def chain_of(job: JobFile, step: JobFileStep) -> tuple[JobFileStep, ...]:
    """The steps from the chain's first (its own target) to `step`, in order."""
    steps = [step]
    while steps[0].remix_of is not None:
        steps.insert(0, job.steps[steps[0].remix_of])
    return tuple(steps)


def _processors(options: Mapping[str, object]) -> tuple[str, ...]:
    processors = options.get("processors", DEFAULTS["processors"])
    return tuple(str(name) for name in processors) if isinstance(processors, list | tuple) else ()


def _number(options: Mapping[str, object], name: str) -> int:
    return int(str(options.get(name) or 0))


def chain_as_faces(job: JobFile, step: JobFileStep) -> ChainAsFaces | None:
    """`step`'s remix chain as one job of chained passes, where it is one; None otherwise (the chain runs as
    successive jobs, each on the one before's output: `chain_refusal` says why). Pure.

    Steps that swap faces by a reference face with the same options are people of one job's options. Steps
    whose options differ (swap then enhance, another selector, a trim on one step) are passes with options
    of their own, and the job's options are the last step's (its output is the job's), trimmed as the
    steps' trims compose."""
    if chain_refusal(job, step) is not None:
        return None
    chain = chain_of(job, step)
    shared = [_without(each.options, PERSON_OPTIONS) for each in chain]
    options = shared[0]
    reapplied = [name for name in REAPPLIED_OPTIONS if options.get(name, DEFAULTS.get(name)) != DEFAULTS.get(name)]
    same = all(other == options for other in shared[1:]) and not reapplied
    if same and options.get("face_selector_mode", "reference") == "reference":
        people = tuple(
            ChainedPerson(each.sources, _number(each.options, "reference_frame_number"),
                          _number(each.options, "reference_face_position"))
            for each in chain
        )  # fmt: skip
        return ChainAsFaces(tuple(each.index for each in chain), chain[0].target, MappingProxyType(options), people)
    start, end, passes = 0, None, []
    for each in chain:
        # The step's numbering starts at its target's frame 0: the original's `start`, after the trims before.
        frame = start + _number(each.options, "reference_frame_number")
        own = _without(each.options, (*PERSON_OPTIONS, *TRIM_OPTIONS))
        passes.append(ChainedPerson(each.sources, frame, _number(each.options, "reference_face_position"),
                                    MappingProxyType(own)))  # fmt: skip
        trim_end = each.options.get("trim_frame_end")
        if trim_end is not None:
            end = start + int(str(trim_end)) if end is None else min(end, start + int(str(trim_end)))
        start += _number(each.options, "trim_frame_start")
    trims = {"trim_frame_start": start} if start else {}
    trims |= {"trim_frame_end": end} if end is not None else {}
    job_options = {**_without(chain[-1].options, (*PERSON_OPTIONS, *TRIM_OPTIONS)), **trims}
    return ChainAsFaces(
        tuple(each.index for each in chain), chain[0].target, MappingProxyType(job_options), tuple(passes)
    )


def chain_refusal(job: JobFile, step: JobFileStep) -> str | None:
    """Why `step`'s remix chain cannot be one job of chained passes (it then runs as successive jobs, each on
    the one before's output), or None. Pure."""
    chain = chain_of(job, step)
    if len(chain) < 2:
        return "it is no remix chain"
    if len(chain) > MAX_FACES:
        return f"its {len(chain)} steps are more than the {MAX_FACES} passes one job runs"
    for each in chain:
        where = f"step {each.index}"
        if "lip_syncer" in _processors(each.options):
            return f"{where} runs the lip syncer, whose sources are a voice, not a pass's faces"
        changed = [name for name in CHAIN_SIZE_OPTIONS if each.options.get(name, DEFAULTS[name]) != DEFAULTS[name]]
        if changed:
            return f"{where} sets {changed[0]}, which a remix applies again to the scaled or re-timed video before it"
        if "frame_enhancer" in _processors(each.options) and each is not chain[-1]:
            return f"{where} runs the frame enhancer, whose larger frames a later pass would get"
    return None


def _without(options: Mapping[str, object], names: tuple[str, ...]) -> dict[str, object]:
    return {name: value for name, value in options.items() if name not in names}

"""`fusionfleet submit --facefusion-job JOB.json`: a job file FaceFusion 3.8.1's job commands wrote, on the farm.

Each step is a farm job of its own (fusionfleet.facefusion.job_file reads the file), with the step's local
files uploaded as `submit` uploads them and its options checked as any manifest's before anything is
uploaded. Steps that stand alone are submitted together and render side by side, and so is a remix step
(its target an earlier step's output) whose chain can run as passes: one job of chained passes on the first
step's target, each step a pass with its own sources, person and options (`chain_as_faces`; a chain that
scales or re-times between steps cannot, `chain_refusal`). Any other remix step is submitted once the step
it remixes has succeeded, with the output it gave as its target, as FaceFusion's `job-run` feeds a step's file to the
next: so a file with such remix steps needs `--wait`. Each step's output is written to its own
`output_path` (or under its name in `--output-dir`), as `job-run` writes it. The engine is `facefusion`
unless `--engine` names another. Through the stack itself or, with `--api`, the tenant HTTP API (a `POST
/jobs` per job, as `submit --api`; a chain of passes the same one job, its `faces` naming uploads). Each
step's job is any job: `status`, `wait`, `download`, `cancel` take its id.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from fleetctl import api_commands, tenant_cli
from fleetctl.api_client import ApiClient
from fleetctl.client import Client, build_manifest, job_name, local_output_suffix, named_after_content
from fleetctl.exits import Exit, UsageError, of_state
from fleetctl.job_commands import check_local_engine, client_of, follow, say
from fusionfleet import layout
from fusionfleet.errors import JobRejected, MediaError
from fusionfleet.facefusion.catalogue import CATALOGUE
from fusionfleet.facefusion.job_file import (
    ChainAsFaces,
    JobFile,
    JobFileStep,
    chain_as_faces,
    read_job_file,
    without_defaults,
)
from fusionfleet.jobs.engine_options import faces_problem, honoured, unsupported_option_problems
from fusionfleet.jobs.manifest import parse_manifest
from fusionfleet.jobs.output_format import DEFAULT_CONTAINER, container_of_key
from fusionfleet.jobs.states import JobState
from fusionfleet.jobs.timeline import trim_range
from fusionfleet.jobs.views import JobView
from fusionfleet.media.ffmpeg import join_argv
from fusionfleet.media.runner import run_ffmpeg
from fusionfleet.media.sniff import SNIFF_BYTES, image_format
from fusionfleet.progress import bar

JOB_FILE_ENGINE = "facefusion"  # the engine a FaceFusion job file is rendered with unless --engine says
JOIN_TIMEOUT_S = 600.0  # one stream copy of a joined output's videos
FLAG_HELP = (
    "a job file written by FaceFusion 3.8.1's job-create/job-add-step/job-remix-step (its .jobs/*/ID.json): "
    "each step a job of its own, its output written to the step's output_path (docs/engines.md)"
)


def add_job_file_argument(submit: argparse.ArgumentParser) -> None:
    submit.add_argument("--facefusion-job", type=Path, metavar="JOB.json", help=FLAG_HELP)


@dataclass(frozen=True)
class Ended:
    code: Exit
    written: Path | None  # the output as written here (None: the job gave none, or the wait gave up)


def _describe(view: JobView) -> str:
    counts = view.segments
    if not counts.total:
        return str(view.state)
    failed = f", {counts.failed} failed" if counts.failed else ""
    return f"{view.state} {bar(counts.done, counts.total)} {counts.done}/{counts.total} segments{failed}"


class Farm(Protocol):
    """Where the steps go: the stack itself, or the tenant HTTP API."""

    def submit(self, step: JobFileStep, target: Path, name: str) -> str: ...

    def submit_chain(self, chain: ChainAsFaces, output: str, name: str) -> str: ...

    def wait(self, job_id: str, timeout_s: float, destination: Path) -> Ended: ...


@dataclass(frozen=True)
class StackFarm:
    client: Client
    args: argparse.Namespace
    engine: str

    def submit_chain(self, chain: ChainAsFaces, output: str, name: str) -> str:
        """The chain as one job on its first step's target (its output where the stack writes a job's)."""
        args = self.args
        return self.client.submit(
            _chain_sources(chain), Path(chain.target), args.priority, self.engine, args.quality, None,
            dict(chain.options), name, say, tenant=args.tenant, extra=tenant_cli.webhook_fields(args),
            faces=_chain_faces(chain),
        ).job_id  # fmt: skip

    def submit(self, step: JobFileStep, target: Path, name: str) -> str:
        args = self.args
        return self.client.submit(
            [Path(source) for source in step.sources], target, args.priority, self.engine, args.quality,
            args.reference, _step_options(step, self.engine), name, say, tenant=args.tenant,
            extra=tenant_cli.webhook_fields(args),
        ).job_id  # fmt: skip

    def wait(self, job_id: str, timeout_s: float, destination: Path) -> Ended:
        """The job followed to its end, said, its output downloaded to `destination` (or beside it under the
        name of what it holds)."""
        waiting = argparse.Namespace(**{**vars(self.args), "timeout": timeout_s})
        view = follow(self.client, waiting, job_id, _describe)
        if not view.ended:
            say(f"gave up waiting: job {job_id} still {view.state}; `fusionfleet wait {job_id}` goes on")
            return Ended(Exit.GAVE_UP, None)
        if view.state is JobState.SUCCEEDED and view.result is not None:
            written = self.client.download(view.result, destination)
            say(f"succeeded: {view.result.frames} frames, {view.result.duration_s:.3f} s → {written}")
            return Ended(Exit.DONE, written)
        say(f"{view.state.lower()}: {view.reason}")
        code = of_state(view.state)
        return Ended(Exit.FAILED if code is Exit.DONE else code, None)


@dataclass(frozen=True)
class ApiFarm:
    api: ApiClient
    args: argparse.Namespace
    engine: str

    def submit_chain(self, chain: ChainAsFaces, output: str, name: str) -> str:
        """One `POST /jobs` of the chain, its body the manifest the stack's is (`StackFarm.submit_chain`): each
        mapping of `faces` naming its sources by their upload names."""
        files, body = self._request(_chain_sources(chain), Path(chain.target), output, dict(chain.options), name)
        uploaded = body.pop("source")  # each mapping names its own
        body["faces"] = [{**face, "source": [uploaded[i] for i in face["source"]]} for face in _chain_faces(chain)]
        return self.api.submit(files, body, say)

    def submit(self, step: JobFileStep, target: Path, name: str) -> str:
        """One `POST /jobs` of the step, its files named by their role, as `submit --api` names them."""
        options = _step_options(step, self.engine)
        sources = [Path(source) for source in step.sources]
        files, body = self._request(sources, target, step.output, options, name, self.args.reference)
        return self.api.submit(files, body, say)

    def _request(
        self, sources: list[Path], target: Path, output: str, options: dict[str, Any], name: str,
        reference: Path | None = None,
    ) -> tuple[dict[str, Path], dict[str, Any]]:  # fmt: skip
        """The files to upload, each under the name of its role, and the body of `POST /jobs` naming them."""
        args = self.args
        files = {f"source-{i}{path.suffix.lower()}": path for i, path in enumerate(sources)}
        target_name = f"target{target.suffix.lower()}"
        files[target_name] = target
        reference_name = f"reference{reference.suffix.lower()}" if reference else None
        if reference:
            files[str(reference_name)] = reference
        body = build_manifest(
            [key for key in files if key.startswith("source-")], target_name, "", args.priority, self.engine,
            args.quality, reference_name, options,
        )  # fmt: skip
        body.update(tenant_cli.webhook_fields(args))
        suffix = local_output_suffix(target, target_name)
        if container_of_key(suffix) and (named := container_of_key(output)):
            suffix = f".{named}"  # a video's container is the one its output_path names, as FaceFusion writes it
        body["output"] = name + suffix  # under the tenant's outputs
        return files, body

    def wait(self, job_id: str, timeout_s: float, destination: Path) -> Ended:
        job = api_commands.follow(self.api, job_id, timeout_s)
        code = Exit(api_commands.fetch(self.api, job, destination, None, timeout_s))
        link = str(job.get("download_url") or "")
        written = named_after_content(destination, urllib.parse.urlparse(link).path)[0] if link else None
        return Ended(code, written if code is Exit.DONE else None)


def _chain_sources(chain: ChainAsFaces) -> list[Path]:
    return [Path(source) for person in chain.people for source in person.sources]


def _chain_faces(chain: ChainAsFaces) -> tuple[dict[str, Any], ...]:
    """A mapping of `faces` per step of the chain, in order, each with the step's sources (indices into
    `_chain_sources`) and its person (its reference frame of the original target)."""
    faces, first = [], 0
    for person in chain.people:
        own = {} if person.options is None else {"options": dict(person.options)}  # a step's own options
        indices = list(range(first, first + len(person.sources)))
        faces.append(
            {"source": indices, "reference_frame": person.frame, "reference_face_position": person.position, **own}
        )
        first += len(person.sources)
    return tuple(faces)


def _check_flags(args: argparse.Namespace) -> None:
    """What the job file says itself is not said again on the command line."""
    given = [
        flag
        for flag, value in (("-s/--source", args.source), ("-t/--target", args.target), ("-o/--output", args.output))
        if value
    ]
    given.extend(spec.flag for spec in CATALOGUE.values() if getattr(args, f"ff_{spec.name}", None) is not None)
    if args.item_notices:
        given.append("--item-notices")
    if given:
        raise UsageError(
            f"--facefusion-job takes each step's sources, target, output and options from the job file; leave out "
            f"{', '.join(given)} (--output-dir puts every step's output in one folder)"
        )


def _destinations(job: JobFile, output_dir: Path | None) -> dict[str, Path]:
    """Where each output_path is written: there, or under its name in --output-dir."""
    places = {
        step.output: output_dir / Path(step.output).name if output_dir else Path(step.output) for step in job.steps
    }
    seen: dict[Path, str] = {}
    for output, place in places.items():
        if place in seen:
            raise UsageError(f"{seen[place]} and {output} would both be written to {place}: leave out --output-dir")
        seen[place] = output
    return places


def _check_joins(job: JobFile) -> None:
    """Steps naming one output are joined as job-run joins them: videos only (job-run moves pictures over each
    other, keeping the last, and writes nothing for a mix of both)."""
    problems = []
    for output, indexes in job.joins.items():
        pictures = [index for index in indexes if _is_image(Path(job.root(job.steps[index]).target))]
        if pictures:
            steps = ", ".join(map(str, indexes))
            problems.append(
                f"steps {steps}: all write {output!r} from a picture ({'steps' if len(pictures) > 1 else 'step'} "
                f"{', '.join(map(str, pictures))}), and FaceFusion's job-run joins only videos (of pictures it "
                "keeps the last, of a mix nothing): name a different output_path for each step"
            )
    if problems:
        raise JobRejected("the FaceFusion job file cannot run on the farm: " + "; ".join(problems), tuple(problems))


def _is_image(path: Path) -> bool:
    with path.open("rb") as handle:
        return image_format(handle.read(SNIFF_BYTES)) is not None


def _step_options(step: JobFileStep, engine: str) -> dict[str, Any]:
    """The step's options for the engine: all of them for FaceFusion; for another engine only those the user
    chose (a job file carries every option, at FaceFusion's default where none was chosen) and those it applies."""
    options = dict(step.options)
    return options if engine == JOB_FILE_ENGINE else without_defaults(options, honoured(engine))


def _check_steps(job: JobFile, engine: str, tenant: str | None) -> None:
    """Every step's manifest and options judged as the farm judges them, before any upload; every problem."""
    problems: list[str] = []
    for step in job.steps:
        options = _step_options(step, engine)
        name = f"job-file-{step.index}"  # names as submit gives them; the real ones are made at submit
        sources = [f"source-{i}{Path(path).suffix.lower()}" for i, path in enumerate(step.sources)]
        manifest = build_manifest(
            [layout.input_key(name, source, tenant) for source in sources],
            layout.input_key(name, f"target{Path(step.target).suffix.lower()}", tenant),
            layout.default_output_key(layout.manifest_key(name, tenant), ".mp4"), "normal", engine, None, None, options,
        )  # fmt: skip
        try:
            parse_manifest(json.dumps(manifest).encode(), layout.manifest_key(name, tenant))
        except JobRejected as rejected:
            problems.extend(f"steps[{step.index}]: {problem}" for problem in rejected.problems)
            continue
        problems.extend(f"steps[{step.index}]: {problem}" for problem in unsupported_option_problems(engine, options))
    if problems:
        raise JobRejected(
            "the FaceFusion job file cannot run on the farm: " + "; ".join(problems[:10]), tuple(problems)
        )


def _check_chains(chains: dict[int, ChainAsFaces], engine: str, tenant: str | None) -> None:
    """Each chain's own manifest (its steps as passes: `faces`, their options) judged as the slicer judges it,
    before anything is submitted: a chain refused after its job file's first step was already submitted
    would leave that step's job behind. Every problem, named by the step the chain ends at."""
    problems: list[str] = []
    for index, chain in chains.items():
        name = f"job-file-{index}"  # names as submit gives them; the real ones are made at submit
        sources = [
            layout.input_key(name, f"source-{i}{path.suffix.lower()}", tenant)
            for i, path in enumerate(_chain_sources(chain))
        ]
        faces = [{**face, "source": [sources[i] for i in face["source"]]} for face in _chain_faces(chain)]
        manifest = build_manifest(
            [], layout.input_key(name, f"target{Path(chain.target).suffix.lower()}", tenant),
            layout.default_output_key(layout.manifest_key(name, tenant), ".mp4"), "normal", engine, None, None,
            dict(chain.options), {"faces": faces},
        )  # fmt: skip
        del manifest["source"]  # each mapping names its own
        try:
            parsed = parse_manifest(json.dumps(manifest).encode(), layout.manifest_key(name, tenant))
        except JobRejected as rejected:
            problems.extend(f"steps {_steps(chain)}: {problem}" for problem in rejected.problems)
            continue
        problems.extend(f"steps {_steps(chain)}: {problem}" for problem in unsupported_option_problems(engine,
                        parsed.options))  # fmt: skip
        if problem := faces_problem(engine, parsed.faces):
            problems.append(f"steps {_steps(chain)}: {problem}")
        first, last = trim_range(parsed.options, sys.maxsize)  # the steps' trims composed, whatever the target's length
        if last <= first:
            problems.append(f"steps {_steps(chain)}: their trims composed (trim_frame_start {first}, trim_frame_end "
                            f"{last} of the first step's target) leave no frame to render")  # fmt: skip
    if problems:
        raise JobRejected(
            "the FaceFusion job file cannot run on the farm: " + "; ".join(problems[:10]), tuple(problems)
        )


def _steps(chain: ChainAsFaces) -> str:
    return ", ".join(map(str, chain.steps))


def _check_files(job: JobFile) -> None:
    for step in job.steps:
        named = [(f"source_paths[{i}]", path) for i, path in enumerate(step.sources)]
        if step.remix_of is None:
            named.append(("target_path", step.target))
        for field, path in named:
            if not Path(path).is_file():
                raise UsageError(f"steps[{step.index}].args.{field}: {path} is not a file")


def cmd_submit_job_file(args: argparse.Namespace) -> int:
    _check_flags(args)
    path: Path = args.facefusion_job
    if not path.is_file():
        raise UsageError(f"{path} is not a file")
    job = read_job_file(path.read_bytes(), path.stem)
    engine = args.engine or JOB_FILE_ENGINE
    _check_steps(job, engine, args.tenant)
    _check_files(job)
    _check_joins(job)
    # A remix chain that can run as passes (each step one pass with its own options) is one job of chained
    # passes on the first step's target, submitted at once (through the stack or the API: the same manifest);
    # any other remix waits for the step it remixes.
    as_passes = engine == JOB_FILE_ENGINE
    chains = {
        step.index: chained
        for step in job.steps
        if step.remix_of is not None and as_passes
        if (chained := chain_as_faces(job, step)) is not None
    }
    needs_wait = [
        f"step {step.index} remixes step {step.remix_of}'s output: the farm submits it once step {step.remix_of} "
        "has succeeded, with its output as the target"
        for step in job.steps
        if step.remix_of is not None and step.index not in chains
    ] + [
        f"steps {', '.join(map(str, indexes))} all write {output}: the CLI joins their outputs there once each has "
        "succeeded, as FaceFusion's job-run joins them"
        for output, indexes in job.joins.items()
    ]
    if needs_wait and not args.wait:
        raise UsageError(f"{needs_wait[0]}, which needs --wait")
    _check_chains(chains, engine, args.tenant)
    finals = _destinations(job, args.output_dir)
    farm = _farm(args, engine)
    base = args.name or job_name(Path(path.stem))  # one name for the file's jobs: <stem>-<time>-<random>
    names = {step.index: f"{base}-{step.index}" for step in job.steps}
    ids: dict[int, str] = {}
    with tempfile.TemporaryDirectory(prefix="fusionfleet-job-file-") as scratch:
        # A step whose output is joined with others' is written here first, as job-run writes its step file.
        destinations = {
            step.index: Path(scratch) / f"step-{step.index}.mp4" if step.output in job.joins else finals[step.output]
            for step in job.steps
        }
        for step in job.steps:  # the steps that stand alone go together and render side by side
            if step.remix_of is None:
                ids[step.index] = farm.submit(step, Path(step.target), names[step.index])
                say(f"step {step.index}: job {ids[step.index]} → {finals[step.output]}")
            elif step.index in chains:
                ids[step.index] = farm.submit_chain(chains[step.index], step.output, names[step.index])
                passes = ", ".join(map(str, chains[step.index].steps))
                say(f"step {step.index}: job {ids[step.index]}, steps {passes} in passes → {finals[step.output]}")
        code = Exit.DONE
        if args.wait:
            code, written = _follow(farm, job, ids, names, destinations, args.timeout)
            joined = _join(job, written, finals, Path(scratch))
            code = joined if code is Exit.DONE else code
    for step in job.steps:
        if step.index in ids:
            print(ids[step.index], flush=True)
    return code


def _join(job: JobFile, written: dict[int, Path], finals: dict[str, Path], scratch: Path) -> Exit:
    """Each output several steps name, their videos joined there in step order by stream copy (FaceFusion's
    job-run's `concat_video`), once every one of them gave its own; else it is not written, and said so.
    Exit.FAILED when a join ffmpeg could not make (its words said)."""
    code = Exit.DONE
    for number, (output, indexes) in enumerate(job.joins.items()):
        container = container_of_key(output) or DEFAULT_CONTAINER  # FaceFusion's concat_video writes output_path's
        final, renamed = named_after_content(finals[output], f"joined.{container}")
        missing = [index for index in indexes if index not in written]
        if missing:
            say(f"{final} not written: step {missing[0]}, one of the steps joined there, gave no output")
            continue
        listed = scratch / f"join-{number}.txt"
        listed.write_text("".join(f"file '{written[index].name}'\n" for index in indexes))
        if renamed:
            say(renamed)
        final.parent.mkdir(parents=True, exist_ok=True)
        try:
            steps = ", ".join(map(str, indexes))
            run_ffmpeg(join_argv(listed, final, container), JOIN_TIMEOUT_S, f"joining steps {steps}")
        except MediaError as error:
            say(f"{final} not written: {error.reason}")
            code = Exit.FAILED
            continue
        say(f"steps {', '.join(map(str, indexes))} joined → {final}")
    return code


def _farm(args: argparse.Namespace, engine: str) -> Farm:
    """The tenant API where the command goes through it (`--api`), else the stack, whose engines are checked."""
    api = api_commands.api_of(args)  # the token names the tenant: a --tenant naming another is refused
    if api is not None:
        return ApiFarm(api, args, engine)
    check_local_engine(argparse.Namespace(**{**vars(args), "engine": engine}))
    return StackFarm(client_of(args), args, engine)


def _follow(
    farm: Farm, job: JobFile, ids: dict[int, str], names: dict[int, str], destinations: dict[int, Path],
    timeout_s: float,
) -> tuple[Exit, dict[int, Path]]:  # fmt: skip
    """Each step to its end in order, a remix step submitted once the step it remixes gave its output; the
    first step's status that is not done (exit 0 when every step is), and each output as written here."""
    deadline = time.monotonic() + timeout_s
    written: dict[int, Path] = {}
    codes: list[Exit] = []
    for step in job.steps:
        if step.remix_of is not None and step.index not in ids:
            parent = written.get(step.remix_of)
            if parent is None:
                say(f"step {step.index}: not submitted: step {step.remix_of}, whose output it remixes, gave none here")
                continue
            ids[step.index] = farm.submit(step, parent, names[step.index])
            say(f"step {step.index}: job {ids[step.index]}, remixing step {step.remix_of}'s output")
        say(f"step {step.index}: following job {ids[step.index]}")
        remaining = max(0.0, deadline - time.monotonic())
        ended = farm.wait(ids[step.index], remaining, destinations[step.index])
        codes.append(ended.code)
        if ended.written is not None:
            written[step.index] = ended.written
    return next((code for code in codes if code is not Exit.DONE), Exit.DONE), written

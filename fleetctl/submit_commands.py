"""`fusionfleet submit`, `wait` and `download`: a job (or batch) in, followed to its end, its output out.

`submit` takes FaceFusion's own names for its paths beside the fleet's (`-s/--source-paths`,
`-t/--target-path`, `-o/--output-path`), so a FaceFusion `headless-run` line with `headless-run`
replaced by `submit --wait` runs on the farm unchanged. Every status these commands end with is an
`Exit` (fleetctl.exits).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from fleetctl import api_commands, tenant_cli
from fleetctl.api_client import ApiClient
from fleetctl.batch_client import is_batch, target_files, upload_names
from fleetctl.batch_commands import _wait as wait_for_batch  # the wait `submit --wait` gives a batch
from fleetctl.batch_commands import batch_client_of, cmd_submit_batch, is_batch_id
from fleetctl.client import Client, build_manifest, job_name, local_output_suffix
from fleetctl.exits import EPILOG, Exit, UsageError, of_state
from fleetctl.job_commands import check_local_engine, client_of, follow, say
from fleetctl.job_file_commands import add_job_file_argument, cmd_submit_job_file
from fleetctl.try_commands import fetch_pictures
from fusionfleet.facefusion.flags import add_facefusion_options, collect_facefusion_options
from fusionfleet.jobs.manifest import ENGINE_NAMES, PRIORITIES, QUALITIES
from fusionfleet.jobs.states import JobState
from fusionfleet.jobs.views import JobView
from fusionfleet.progress import bar

DEFAULT_WAIT_S = 3600.0
ENGINE_HELP = (
    "the engine that renders the job (default: the stack's: `classic` on the local stack, as "
    "`local up --default-engine` sets it; `facefusion` on AWS, the template's DefaultEngine)"
)


def add_parsers(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    add_connection: Callable[[argparse.ArgumentParser], None],
) -> None:
    submit = commands.add_parser(
        "submit", help="upload media and a manifest; prints the job's (or batch's) id", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    submit.add_argument(
        "-s", "--source", "--source-paths", dest="source", action="extend", nargs="+", type=Path,
        metavar="FILE", help="face image(s), and at most one audio file for the lip syncer (repeat or list several)",
    )  # fmt: skip
    submit.add_argument(
        "-t", "--target", "--target-path", dest="target", action="append", metavar="TARGET",
        help="the video or image to swap faces in; repeat it, or name a folder or a quoted glob, for a batch",
    )  # fmt: skip
    submit.add_argument(
        "-o", "--output", "--output-path", dest="output", type=Path, metavar="FILE",
        help="with --wait: where to download the result",
    )  # fmt: skip
    submit.add_argument("--priority", default="normal", choices=PRIORITIES)
    submit.add_argument("--engine", choices=ENGINE_NAMES, help=ENGINE_HELP)
    submit.add_argument("--quality", choices=QUALITIES, help="built-in engine preset")
    submit.add_argument("--reference", type=Path, help="reference face image for --face-selector-mode reference")
    submit.add_argument("--name", help="job name (default: target name + time)")
    submit.add_argument("--tenant", help="submit as this tenant: everything goes under tenants/TENANT/")
    submit.add_argument("--output-dir", type=Path, help="with --wait: the folder to download the output(s) into")
    submit.add_argument("--item-notices", action="store_true", help="a batch: each item also sends its own notice")
    submit.add_argument("--wait", action="store_true", help="follow the job and download the result")
    _add_timeout(submit, "--wait waits")
    api_commands.add_arguments(submit)
    tenant_cli.add_submit_arguments(submit)
    add_connection(submit)
    add_job_file_argument(submit)
    add_facefusion_options(submit)

    wait = commands.add_parser(
        "wait", help="follow a submitted job to its end and download its result (a batch: its items' outputs)",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    wait.add_argument("job_id", help="a job's or a batch's id, as `submit` printed it")
    _add_outputs(wait)
    _add_timeout(wait, "to wait")
    api_commands.add_arguments(wait)
    add_connection(wait)

    fetch = commands.add_parser(
        "download", help="download a succeeded job's result (a batch: its succeeded items' outputs)",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    fetch.add_argument("job_id", help="a job's or a batch's id")
    _add_outputs(fetch)
    api_commands.add_arguments(fetch)
    add_connection(fetch)


def _add_timeout(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_WAIT_S, metavar="S",
        help=f"seconds {what} before it gives up with exit status 4; the job goes on (default {DEFAULT_WAIT_S:.0f})",
    )  # fmt: skip


def _add_outputs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", type=Path, metavar="FILE", help="where the job's result goes")
    parser.add_argument(
        "--output-dir", type=Path, help="the folder the result goes into, under its own name (default: here)"
    )


def _check_files(paths: list[Path]) -> None:
    for path in paths:
        if not path.is_file():
            raise UsageError(f"{path} is not a file")


def _describe(view: JobView) -> str:
    counts = view.segments
    if view.analysis is not None:
        read = view.analysis
        return f"{view.state} content analysis {bar(read.frames_read, read.frame_count)} {read.percent:.0f} %"
    if not counts.total:
        return str(view.state)
    return f"{view.state} {bar(counts.done, counts.total)} {counts.done}/{counts.total} segments" + (
        f", {counts.failed} failed" if counts.failed else ""
    )


def cmd_submit(args: argparse.Namespace) -> int:
    if args.facefusion_job is not None:
        return cmd_submit_job_file(args)
    required = (("-s/--source/--source-paths", args.source), ("-t/--target/--target-path", args.target))
    missing = [flag for flag, given in required if not given]
    if missing:
        raise UsageError(f"the following arguments are required: {', '.join(missing)} (or --facefusion-job JOB.json)")
    _check_files([*args.source, *([args.reference] if args.reference else [])])
    api = api_commands.api_of(args)  # the token names the tenant: a --tenant naming another is refused
    if api is None:
        check_local_engine(args, collect_facefusion_options(args))
    if is_batch(args.target):
        return cmd_submit_batch(args) if api is None else cmd_submit_api(args, api, target_files(args.target))
    args.target = Path(args.target[0])
    _check_files([args.target])
    if api is not None:
        return cmd_submit_api(args, api, [args.target])
    if args.output and not args.wait:
        # FaceFusion's -o writes the file before it returns; a submitted job's result comes later.
        say(f"note: nothing is written to {args.output} without --wait: `fusionfleet wait JOB -o {args.output}`")
    options = collect_facefusion_options(args)
    client = client_of(args)
    submission = client.submit(
        args.source, args.target, args.priority, args.engine, args.quality, args.reference, options, args.name, say,
        tenant=args.tenant, extra=tenant_cli.webhook_fields(args),
    )  # fmt: skip
    say(f"job {submission.job_id}")
    code = Exit.DONE
    if args.wait:
        view = follow(client, args, submission.job_id, _describe)
        named = Path(submission.output_key).name
        code = _report(client, view, args.output or (args.output_dir or Path.cwd()) / named, args.timeout)
    print(submission.job_id, flush=True)
    return code


def cmd_submit_api(args: argparse.Namespace, api: ApiClient, targets: list[Path]) -> int:
    """`submit --api`: the job (or batch) goes through the HTTP API; files are named by their role as the
    bucket path names them, and so is the output: a download takes the same name either way."""
    files = {f"source-{i}{path.suffix.lower()}": path for i, path in enumerate(args.source)}
    batch = is_batch([str(path) for path in targets]) or len(targets) > 1
    names = upload_names(targets) if batch else [f"target{targets[0].suffix.lower()}"]
    files.update(zip(names, targets, strict=True))
    reference = f"reference{args.reference.suffix.lower()}" if args.reference else None
    if args.reference:
        files[str(reference)] = args.reference
    body = build_manifest(
        [name for name in files if name.startswith("source-")], names[0], "",
        args.priority, args.engine, args.quality, reference, collect_facefusion_options(args),
    )  # fmt: skip
    body.update(tenant_cli.webhook_fields(args))
    if batch:
        del body["target"], body["output"]  # the API names a batch's output folder; items after their targets
        body["targets"] = names
        if args.item_notices:
            body["item_notices"] = True
    else:
        # A plain name: the API places it under the tenant's outputs (the bucket path's name for it).
        body["output"] = (args.name or job_name(targets[0])) + local_output_suffix(targets[0], names[0])
    job_id = api.submit(files, body, say)
    say(f"{'batch' if batch else 'job'} {job_id}")
    code: int = Exit.DONE
    if args.wait:
        job = api_commands.follow(api, job_id, args.timeout)
        code = api_commands.fetch(api, job, None if batch else args.output, args.output_dir, args.timeout)
    print(job_id, flush=True)
    return code


def _describe_api(status: dict[str, object]) -> str:
    """A job the API answered for, as one progress line (kept for fleetctl.job_file_commands)."""
    return api_commands.describe(dict(status))


def _report_api(status: dict[str, object], destination: Path) -> Exit:
    """The end of a wait through the API, said, its result downloaded to `destination`."""
    return Exit(api_commands.fetch(None, dict(status), destination, None, None))


def _report(client: Client, view: JobView, destination: Path | None, timeout_s: float) -> Exit:
    """The end of a wait, said and downloaded; `destination` None: under the output's own name, here."""
    if not view.ended:
        say(f"gave up waiting: still {view.state} after {timeout_s:.0f} s; `fusionfleet wait {view.job_id}` goes on")
        return Exit.GAVE_UP
    if view.state is JobState.SUCCEEDED and view.result is not None:
        path = client.download(view.result, destination or Path.cwd() / Path(view.result.key).name)
        say(f"succeeded: {view.result.frames} frames, {view.result.duration_s:.3f} s → {path}")
        say("timings: " + ", ".join(f"{k} {v}" for k, v in view.result.timings.items()))
        return Exit.DONE
    if view.state in (JobState.REJECTED, JobState.CANCELLED):
        say(f"{view.state.lower()}: {view.reason}")
    else:
        say(f"failed ({view.state}): {view.reason}")
    return _ended(view.state)


def _ended(state: JobState) -> Exit:
    """The status of an ended job that gave nothing to download: a success without its result is none."""
    code = of_state(state)
    return Exit.FAILED if code is Exit.DONE else code


def cmd_wait(args: argparse.Namespace) -> int:
    if is_batch_id(args, args.job_id):
        return _batch(args, wait=True)
    client = client_of(args)
    view = follow(client, args, args.job_id, _describe)
    pictures = _pictures(args, client, view)
    return pictures if pictures is not None else _report(client, view, _named(args, view), args.timeout)


def cmd_download(args: argparse.Namespace) -> int:
    if is_batch_id(args, args.job_id):
        return _batch(args, wait=False)
    client = client_of(args)
    view = client.status(args.job_id)
    pictures = _pictures(args, client, view)
    if pictures is not None:
        return pictures
    if view.state is JobState.SUCCEEDED and view.result is not None:
        return _report(client, view, _named(args, view), 0)
    if not view.ended:
        say(f"still {view.state}: nothing to download yet (`fusionfleet wait {view.job_id}` waits for it)")
        return Exit.FAILED
    say(f"{view.state.lower()}: {view.reason}" if view.reason else f"{view.state.lower()}: it has no output")
    return _ended(view.state)


def _pictures(args: argparse.Namespace, client: Client, view: JobView) -> int | None:
    """A succeeded test render's pictures into --output-dir (here by default), as `try` writes them;
    None for any other job (a test render has no one output file: -o is refused)."""
    if view.state is not JobState.SUCCEEDED:
        return None
    frames = client.trial_frames(view.job_id)
    if not frames:
        return None
    if args.output is not None:
        raise UsageError(f"{view.job_id} is a test render: name a folder with --output-dir, not a file")
    return fetch_pictures(client, view, frames, args.output_dir or Path.cwd())


def _named(args: argparse.Namespace, view: JobView) -> Path | None:
    """--output as given, else the output's own name in --output-dir (None: here)."""
    if args.output is not None:
        return Path(args.output)
    if args.output_dir is None or view.result is None:
        return None
    return Path(args.output_dir) / Path(view.result.key).name


def _batch(args: argparse.Namespace, wait: bool) -> int:
    """A batch's id: its items' outputs into --output-dir (a batch has no one output file)."""
    if args.output is not None:
        raise UsageError(f"{args.job_id} is a batch: name a folder with --output-dir, not a file")
    client = batch_client_of(args)
    if wait:
        return wait_for_batch(args, client, args.job_id, args.output_dir or Path.cwd())
    detail = client.detail(args.job_id)
    folder = args.output_dir or Path.cwd()
    written = client.download(detail, folder, say)
    say(f"{detail.batch.state.lower()}: {len(written)} of {detail.batch.items.total} outputs in {folder}")
    if not detail.batch.ended:
        return Exit.FAILED
    return of_state(detail.batch.state)

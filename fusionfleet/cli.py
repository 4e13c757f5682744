"""`fusionfleet`: run the local stack, submit jobs, follow them, and render on this machine."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from fusionfleet import connection
from fusionfleet.client import Client, JobStatus
from fusionfleet.errors import FusionFleetError
from fusionfleet.manifest import ENGINE_NAMES, PRIORITIES, QUALITIES
from fusionfleet.options import CATALOGUE, OptionsError, parse_cli_value, validate_options
from fusionfleet.orchestrator import StepFunctions
from fusionfleet.progress import ProgressLine, bar
from fusionfleet.storage import S3Storage

EXIT_FAILED = 1
EXIT_REJECTED = 2
EXIT_TIMEOUT = 3


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _add_connection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--endpoint-url", help=f"AWS endpoint (LocalStack); env {connection.ENV_ENDPOINT}")
    parser.add_argument("--region", help="AWS region; env AWS_REGION")
    parser.add_argument("--stack", help=f"stack name (default {connection.DEFAULT_STACK}); env {connection.ENV_STACK}")


def add_facefusion_options(parser: argparse.ArgumentParser) -> None:
    """FaceFusion's processing options under their own flag names (`--face-selector-mode many`)."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    for spec in CATALOGUE.values():
        group = groups.get(spec.group)
        if group is None:
            group = groups[spec.group] = parser.add_argument_group(f"FaceFusion {spec.group} options")
        group.add_argument(
            spec.flag,
            dest=f"ff_{spec.name}",
            nargs="+" if spec.multiple else None,
            metavar=spec.name.upper(),
            help=spec.help or argparse.SUPPRESS,
        )


def collect_facefusion_options(args: argparse.Namespace) -> dict[str, Any]:
    raw: dict[str, Any] = {}
    problems: list[str] = []
    for spec in CATALOGUE.values():
        value = getattr(args, f"ff_{spec.name}", None)
        if value is None:
            continue
        try:
            raw[spec.name] = parse_cli_value(spec, value if isinstance(value, list) else [value])
        except OptionsError as error:
            problems.extend(error.problems)
    if problems:
        raise OptionsError(problems)
    return validate_options(raw)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fusionfleet", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    local = commands.add_parser("local", help="the local stack on LocalStack").add_subparsers(
        dest="local_command", required=True
    )
    up = local.add_parser("up", help="start LocalStack, deploy the template (Stage=local), start slicer and workers")
    up.add_argument("--workers", type=int, default=2, help="render worker processes (default 2)")
    up.add_argument("--port", type=int, help="LocalStack's port (default 4566)")
    up.add_argument("--default-engine", default="classic", choices=ENGINE_NAMES, help="engine for jobs that name none")
    up.add_argument("--stack", default=connection.DEFAULT_STACK)
    up.add_argument(
        "--visibility-seconds", type=int, default=120, help="how long a worker holds a message between heartbeats"
    )
    up.add_argument("--faults-file", type=Path, help="inject faults into the workers (chaos runs and fault tests)")
    up.add_argument("--state-dir", type=Path, help="where the local stack keeps state and logs")
    for name in ("down", "status"):
        sub = local.add_parser(name, help=f"{name} the local stack")
        sub.add_argument("--state-dir", type=Path)

    submit = commands.add_parser("submit", help="upload media and a manifest; prints the job id")
    submit.add_argument("--source", action="append", required=True, type=Path, help="face image (repeat for several)")
    submit.add_argument("--target", required=True, type=Path, help="the video to swap faces in")
    submit.add_argument("--priority", default="normal", choices=PRIORITIES)
    submit.add_argument("--engine", choices=ENGINE_NAMES)
    submit.add_argument("--quality", choices=QUALITIES, help="built-in engine preset")
    submit.add_argument("--reference", type=Path, help="reference face image for --face-selector-mode reference")
    submit.add_argument("--name", help="job name (default: target name + time)")
    submit.add_argument("--output", type=Path, help="with --wait: where to download the result")
    submit.add_argument("--wait", action="store_true", help="follow the job and download the result")
    submit.add_argument("--timeout", type=float, default=3600, help="seconds --wait waits (default 3600)")
    _add_connection(submit)
    add_facefusion_options(submit)

    status = commands.add_parser("status", help="state, segments done/failed/total, output location")
    status.add_argument("job_id")
    _add_connection(status)

    commands.add_parser(
        "swap", help="render one video on this machine (no cloud); see `fusionfleet swap --help`", add_help=False
    )
    return parser


def _client(args: argparse.Namespace) -> Client:
    conn = connection.resolve(args.endpoint_url, args.region, args.stack, env=os.environ)
    resources = conn.resources()
    return Client(S3Storage(conn.aws.client("s3")), StepFunctions(conn.aws.client("stepfunctions")), resources)


def _describe(status: JobStatus) -> str:
    progress = status.progress
    if progress is None:
        return f"{status.state}"
    done = progress.succeeded
    return f"{status.state} {bar(done, progress.total)} {done}/{progress.total} segments" + (
        f", {progress.failed} failed" if progress.failed else ""
    )


def cmd_submit(args: argparse.Namespace) -> int:
    options = collect_facefusion_options(args)
    client = _client(args)
    submission = client.submit(
        args.source, args.target, args.priority, args.engine, args.quality, args.reference, options, args.name, say
    )
    say(f"job {submission.job_id}")
    code = 0
    if args.wait:
        line = ProgressLine()
        status = client.wait(submission.job_id, args.timeout, lambda s: line.show(_describe(s)))
        line.done()
        code = _report(client, status, args.output or Path.cwd() / Path(submission.output_key).name)
    print(submission.job_id, flush=True)
    return code


def _report(client: Client, status: JobStatus, destination: Path) -> int:
    if status.state == "SUCCEEDED" and status.output:
        path = client.download(status.output["output"], destination)
        timings = status.output.get("timings", {})
        say(f"succeeded: {status.output['frames']} frames, {status.output['duration_s']:.3f} s → {path}")
        say("timings: " + ", ".join(f"{k} {v}" for k, v in timings.items()))
        return 0
    if status.state == "REJECTED":
        say(f"rejected: {status.reason}")
        return EXIT_REJECTED
    if status.state == "WAIT_TIMEOUT":
        say(f"gave up waiting: {status.reason}")
        return EXIT_TIMEOUT
    say(f"failed ({status.state}): {status.reason}")
    return EXIT_FAILED


def cmd_status(args: argparse.Namespace) -> int:
    status = _client(args).status(args.job_id)
    print(f"job       {status.job_id}")
    print(f"state     {status.state}")
    if status.progress:
        p = status.progress
        print(
            f"segments  {p.succeeded} done, {p.failed} failed, {p.running} running, "
            f"{p.pending} pending, {p.total} total"
        )
    if status.output:
        print(f"output    {status.output['output']['uri']}")
        print(f"download  {status.output.get('download_url', '')}")
    if status.reason:
        print(f"reason    {status.reason}")
    return 0 if status.state not in ("FAILED", "REJECTED", "TIMED_OUT", "ABORTED") else EXIT_FAILED


def cmd_local(args: argparse.Namespace) -> int:
    from fusionfleet.local.paths import LocalPaths
    from fusionfleet.local.supervisor import LocalStack, UpOptions

    stack = LocalStack(LocalPaths.discover(args.state_dir, env=os.environ), say)
    if args.local_command == "up":
        state = stack.up(
            UpOptions(
                workers=args.workers,
                port=args.port,
                stack=args.stack,
                default_engine=args.default_engine,
                visibility_s=args.visibility_seconds,
                faults_file=args.faults_file,
            )
        )
        print(state.endpoint, flush=True)
        return 0
    if args.local_command == "down":
        stack.down()
        return 0
    print("\n".join(stack.status()))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["swap"]:
        # The single-machine render runs the worker's own engine code, in the worker package.
        os.execv(sys.executable, [sys.executable, "-m", "gpu_worker", "swap", *argv[1:]])
    args = build_parser().parse_args(argv)
    try:
        if args.command == "submit":
            return cmd_submit(args)
        if args.command == "status":
            return cmd_status(args)
        return cmd_local(args)
    except OptionsError as error:
        say("invalid options: " + "; ".join(error.problems))
        return EXIT_REJECTED
    except FusionFleetError as error:
        say(f"error: {error.reason}")
        return EXIT_FAILED
    except (RuntimeError, TimeoutError, FileNotFoundError) as error:
        say(f"error: {error}")
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())

"""`fusionfleet`: run the local stack, submit jobs, follow them, and render on this machine."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from fleetctl import connection, tenant_cli
from fleetctl.api_client import ENV_API_URL, ENV_TOKEN, ApiClient, ApiError, download, ended
from fleetctl.batch_client import is_batch
from fleetctl.batch_commands import cmd_batch_cancel, cmd_batch_retry, cmd_batch_status, cmd_submit_batch, is_batch_id
from fleetctl.client import Client, build_manifest
from fleetctl.dashboard import publish
from fleetctl.job_commands import (
    EXIT_FAILED,
    EXIT_REJECTED,
    EXIT_TIMEOUT,
    client_of,
    cmd_cancel,
    cmd_list,
    cmd_logs,
    cmd_retry,
    cmd_status,
    cmd_workers,
    follow,
    say,
)
from fleetctl.local.processes import UpOptions
from fleetctl.preflight import command as preflight_command
from fleetctl.stack import stack_outputs
from fleetctl.subscriptions import PROTOCOLS, check_tenant, subscribe
from fleetctl.try_commands import add_parser as add_try_parser
from fleetctl.try_commands import cmd_try
from fusionfleet.errors import FusionFleetError
from fusionfleet.facefusion.flags import add_facefusion_options, collect_facefusion_options
from fusionfleet.facefusion.options import OptionsError
from fusionfleet.fleet.workers import DEFAULT_LOST_AFTER_S
from fusionfleet.jobs.image_output import IMAGE_EXTENSIONS
from fusionfleet.jobs.manifest import ENGINE_NAMES, PRIORITIES, QUALITIES
from fusionfleet.jobs.states import JobState, parse_state
from fusionfleet.jobs.timeouts import DEFAULT_VISIBILITY_S
from fusionfleet.jobs.views import JobView
from fusionfleet.progress import ProgressLine, bar


def _add_connection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--endpoint-url", help=f"AWS endpoint (LocalStack); env {connection.ENV_ENDPOINT}")
    parser.add_argument("--region", help="AWS region; env AWS_REGION")
    parser.add_argument("--stack", help=f"stack name (default {connection.DEFAULT_STACK}); env {connection.ENV_STACK}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fusionfleet", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    local = commands.add_parser("local", help="the local stack on LocalStack").add_subparsers(
        dest="local_command", required=True
    )
    up = local.add_parser("up", help="start LocalStack, deploy the template (Stage=local), start slicer and workers")
    up.add_argument(
        "--workers",
        type=int,
        default=UpOptions.workers,
        help=f"render worker processes (default {UpOptions.workers}; with --max-workers the minimum)",
    )
    up.add_argument(
        "--max-workers",
        type=int,
        help="autoscale render workers between --workers and this many on the render backlog; plans are sized to it",
    )
    up.add_argument(
        "--backlog-per-worker",
        type=float,
        default=UpOptions.backlog_per_worker,
        help="the autoscaler's target: segments waiting or in work per worker",
    )
    up.add_argument("--port", type=int, help="LocalStack's port (default 4566)")
    up.add_argument(
        "--default-engine",
        default=UpOptions.default_engine,
        choices=ENGINE_NAMES,
        help="engine for jobs that name none",
    )
    up.add_argument("--stack", default=connection.DEFAULT_STACK)
    up.add_argument(
        "--visibility-seconds",
        type=int,
        default=DEFAULT_VISIBILITY_S,
        help="how long a worker holds a message between heartbeats",
    )
    up.add_argument(
        "--accepted-backlog-seconds", type=int, default=UpOptions.accepted_backlog_s,
        help="the longest a segment may wait in the queues; every task timeout derives from it",
    )  # fmt: skip
    up.add_argument(
        "--render-concurrency", type=int, default=UpOptions.render_concurrency,
        help="segments of one job in flight at once",
    )  # fmt: skip
    up.add_argument(
        "--tenant-max-running-jobs", type=int, default=UpOptions.tenant_max_running_jobs,
        help="jobs one tenant runs at once (0: no limit)",
    )  # fmt: skip
    up.add_argument(
        "--tenant-max-segments", type=int, default=UpOptions.tenant_max_segments,
        help="segments one tenant has in flight, shared among its jobs (0: no limit)",
    )  # fmt: skip
    up.add_argument(
        "--watchdog-every", type=float, default=UpOptions.watchdog_every_s, help="seconds between watchdog sweeps"
    )
    up.add_argument(
        "--watchdog-stall-seconds", type=int, default=UpOptions.watchdog_stall_s,
        help="a running job with no progress for this long is stopped with a failure notice",
    )  # fmt: skip
    up.add_argument(
        "--watchdog-dispatch-grace-seconds", type=int, default=UpOptions.watchdog_dispatch_grace_s,
        help="a running job none of whose segments was dispatched this long after it started is stopped",
    )  # fmt: skip
    up.add_argument(
        "--backups", action=argparse.BooleanOptionalAction, default=UpOptions.backups,
        help="the watchdog sends a second copy of a straggling segment of a job nearly done (default on)",
    )  # fmt: skip
    up.add_argument(
        "--backup-factor", type=float, default=UpOptions.backup_factor,
        help="a straggler runs longer than this × the median of the job's finished segments",
    )  # fmt: skip
    up.add_argument(
        "--backup-min-age-seconds", type=float, default=UpOptions.backup_min_age_s,
        help="and longer than this",
    )  # fmt: skip
    up.add_argument(
        "--backup-done-fraction", type=float, default=UpOptions.backup_done_fraction,
        help="backups once this share of a job's segments is done…",
    )  # fmt: skip
    up.add_argument(
        "--backup-last-segments", type=int, default=UpOptions.backup_last_segments,
        help="…or once at most this many are left",
    )  # fmt: skip
    up.add_argument(
        "--dashboard-port", type=int,
        help="the dashboard's port on 127.0.0.1 (default: the running dashboard's, else a free one)",
    )  # fmt: skip
    up.add_argument(
        "--api-port", type=int, help="the HTTP API's port on 127.0.0.1 (default: the running API's, else a free one)"
    )
    up.add_argument("--faults-file", type=Path, help="inject faults into the workers (chaos runs and fault tests)")
    up.add_argument("--state-dir", type=Path, help="where the local stack keeps state and logs")
    for name in ("down", "status"):
        sub = local.add_parser(name, help=f"{name} the local stack")
        sub.add_argument("--state-dir", type=Path)
    token = local.add_parser("token", help="print a token the local HTTP API accepts (alone on stdout)")
    token.add_argument("--tenant", required=True, help="the tenant the token is for")
    token.add_argument("--ttl", type=int, default=3600, help="seconds the token is valid (default 3600)")
    token.add_argument("--state-dir", type=Path)
    tenant_cli.add_local_commands(local)

    submit = commands.add_parser("submit", help="upload media and a manifest; prints the job's (or batch's) id")
    submit.add_argument(
        "--source", action="append", required=True, type=Path,
        help="face image, or one audio file for the lip syncer (repeat for several)",
    )  # fmt: skip
    submit.add_argument(
        "--target", action="append", required=True,
        help="the video or image to swap faces in; repeat it, or name a folder or a quoted glob, for a batch",
    )  # fmt: skip
    submit.add_argument("--priority", default="normal", choices=PRIORITIES)
    submit.add_argument("--engine", choices=ENGINE_NAMES)
    submit.add_argument("--quality", choices=QUALITIES, help="built-in engine preset")
    submit.add_argument("--reference", type=Path, help="reference face image for --face-selector-mode reference")
    submit.add_argument("--name", help="job name (default: target name + time)")
    submit.add_argument("--tenant", help="submit as this tenant: everything goes under tenants/TENANT/")
    submit.add_argument("--output", type=Path, help="with --wait: where to download the result")
    submit.add_argument("--output-dir", type=Path, help="with --wait: the folder to download the output(s) into")
    submit.add_argument("--item-notices", action="store_true", help="a batch: each item also sends its own notice")
    submit.add_argument("--wait", action="store_true", help="follow the job and download the result")
    submit.add_argument("--timeout", type=float, default=3600, help="seconds --wait waits (default 3600)")
    submit.add_argument("--api", help=f"submit through the HTTP API at this URL; env {ENV_API_URL}")
    submit.add_argument("--token", help=f"bearer token for --api; env {ENV_TOKEN}")
    tenant_cli.add_submit_arguments(submit)
    _add_connection(submit)
    add_facefusion_options(submit)

    add_try_parser(commands, _add_connection)

    status = commands.add_parser(
        "status", help="state, segments done/failed/total, output location (or a batch's items)"
    )
    status.add_argument("job_id", help="a job's or a batch's id")
    status.add_argument("--tenant", help="only if the job is this tenant's")
    _add_connection(status)

    listing = commands.add_parser("list", help="recent jobs: state, priority, segments done/total, age, output")
    listing.add_argument("--state", choices=list(JobState), help="only jobs in this state")
    listing.add_argument("--limit", type=int, default=20, help="at most this many jobs, newest first (default 20)")
    listing.add_argument("--tenant", help="only this tenant's jobs ('-': only single-tenant jobs)")
    _add_connection(listing)

    cancel = commands.add_parser("cancel", help="stop a running job or batch; it ends CANCELLED with a notice")
    cancel.add_argument("job_id", help="a job's, a batch's or one batch item's id")
    _add_connection(cancel)

    retry = commands.add_parser(
        "retry", help="run a failed or cancelled job again, only its missing segments (a batch: its unsuccessful items)"
    )
    retry.add_argument("job_id", help="a job's, a batch's or one batch item's id")
    _add_connection(retry)

    logs = commands.add_parser("logs", help="what each attempt of each segment did")
    logs.add_argument("job_id")
    logs.add_argument("--segment", type=int, help="only this segment")
    _add_connection(logs)

    workers = commands.add_parser("workers", help="the workers, their current segment and last heartbeat")
    workers.add_argument(
        "--lost-after", type=float, default=DEFAULT_LOST_AFTER_S,
        help=f"a worker silent this many seconds is shown as lost (default {DEFAULT_LOST_AFTER_S:.0f})",
    )  # fmt: skip
    _add_connection(workers)

    subscribe = commands.add_parser("subscribe", help="send one tenant's job notices (and no one else's) somewhere")
    subscribe.add_argument("--tenant", required=True, help="the tenant ('-': the single-tenant jobs/ drops)")
    where = subscribe.add_mutually_exclusive_group(required=True)
    where.add_argument("--email", help="an e-mail address (it must confirm the subscription)")
    where.add_argument("--queue-arn", help="an SQS queue's ARN (its policy must let the topic send)")
    where.add_argument("--url", help="an https:// endpoint (it must confirm the subscription)")
    _add_connection(subscribe)

    dashboard = commands.add_parser("dashboard", help="the tenant dashboard of an AWS stack").add_subparsers(
        dest="dashboard_command", required=True
    )
    publish_page = dashboard.add_parser(
        "publish", help="upload the tenant page and its config.json to the stack's dashboard bucket; prints its URL"
    )
    _add_connection(publish_page)

    tenant_cli.add_commands(commands)
    preflight_command.add_parser(commands, _add_connection)

    commands.add_parser(
        "swap", help="render one video on this machine (no cloud); see `fusionfleet swap --help`", add_help=False
    )
    return parser


def cmd_subscribe(args: argparse.Namespace) -> int:
    check_tenant(args.tenant)  # before reaching for the stack
    conn = connection.resolve(args.endpoint_url, args.region, args.stack, env=os.environ)
    option = next(name for name in PROTOCOLS if getattr(args, name))
    found = subscribe(
        conn.aws.client("sns"), conn.resources().topic_arn, args.tenant, PROTOCOLS[option], getattr(args, option)
    )
    say(f"{found.endpoint} now receives the notices of tenant {found.tenant}")
    print(found.arn)
    return 0


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


def cmd_submit_api(args: argparse.Namespace, base_url: str, token: str) -> int:
    """`submit --api`: the job goes through the HTTP API; files are named by their role, as `submit` does."""
    for path in [*args.source, args.target, *([args.reference] if args.reference else [])]:
        if not path.is_file():
            raise FusionFleetError(f"{path} is not a file")
    files = {f"source-{i}{path.suffix.lower()}": path for i, path in enumerate(args.source)}
    files[f"target{args.target.suffix.lower()}"] = args.target
    reference = f"reference{args.reference.suffix.lower()}" if args.reference else None
    if args.reference:
        files[str(reference)] = args.reference
    body = build_manifest(
        [name for name in files if name.startswith("source-")], f"target{args.target.suffix.lower()}", "",
        args.priority, args.engine, args.quality, reference, collect_facefusion_options(args),
    )  # fmt: skip
    body.update(tenant_cli.webhook_fields(args))
    del body["output"]  # the API places the output under the tenant's prefix
    client = ApiClient(base_url, token)
    job_id = client.submit(files, body, say)
    say(f"job {job_id}")
    code = 0
    if args.wait:
        line = ProgressLine()
        status = client.wait(job_id, args.timeout, lambda s: line.show(_describe_api(s)))
        line.done()
        suffix = args.target.suffix.lower() if args.target.suffix.lower() in IMAGE_EXTENSIONS else ".mp4"
        code = _report_api(status, args.output or (args.output_dir or Path.cwd()) / f"{args.name or job_id}{suffix}")
    print(job_id, flush=True)
    return code


def _describe_api(status: dict[str, object]) -> str:
    segments = status.get("segments")
    if not isinstance(segments, dict) or not segments.get("total"):
        return str(status["state"])
    done, total = int(segments["done"]), int(segments["total"])
    return f"{status['state']} {bar(done, total)} {done}/{total} segments"


def _report_api(status: dict[str, object], destination: Path) -> int:
    state = parse_state(str(status["state"]))
    reason = str(status.get("reason", ""))
    if not ended(status) or state is None:
        say(f"gave up waiting: still {status['state']}")
        return EXIT_TIMEOUT
    if state is JobState.SUCCEEDED and status.get("download_url"):
        say(f"succeeded → {download(str(status['download_url']), destination)}")
        return 0
    if state is JobState.REJECTED:
        say(f"rejected: {reason}")
        return EXIT_REJECTED
    say(f"{state.lower()}: {reason}")
    return EXIT_FAILED


def cmd_submit(args: argparse.Namespace) -> int:
    api_url = args.api or os.environ.get(ENV_API_URL)
    if is_batch(args.target):
        if api_url:
            raise FusionFleetError("--api takes one --target; submit a batch to the stack itself")
        return cmd_submit_batch(args)
    args.target = Path(args.target[0])
    if api_url:
        token = args.token or os.environ.get(ENV_TOKEN)
        if not token:
            raise FusionFleetError(f"--api needs a token: pass --token or set {ENV_TOKEN}")
        return cmd_submit_api(args, api_url, token)
    options = collect_facefusion_options(args)
    client = client_of(args)
    submission = client.submit(
        args.source, args.target, args.priority, args.engine, args.quality, args.reference, options, args.name, say,
        tenant=args.tenant, extra=tenant_cli.webhook_fields(args),
    )  # fmt: skip
    say(f"job {submission.job_id}")
    code = 0
    if args.wait:
        status = follow(client, args, submission.job_id, _describe)
        named = Path(submission.output_key).name
        destination = args.output or (args.output_dir or Path.cwd()) / named
        code = _report(client, status, destination, args.timeout)
    print(submission.job_id, flush=True)
    return code


def _report(client: Client, view: JobView, destination: Path, timeout_s: float) -> int:
    if not view.ended:
        say(f"gave up waiting: still {view.state} after {timeout_s:.0f} s")
        return EXIT_TIMEOUT
    if view.state is JobState.SUCCEEDED and view.result is not None:
        path = client.download(view.result, destination)
        say(f"succeeded: {view.result.frames} frames, {view.result.duration_s:.3f} s → {path}")
        say("timings: " + ", ".join(f"{k} {v}" for k, v in view.result.timings.items()))
        return 0
    if view.state is JobState.REJECTED:
        say(f"rejected: {view.reason}")
        return EXIT_REJECTED
    if view.state is JobState.CANCELLED:
        say(f"cancelled: {view.reason}")
        return EXIT_FAILED
    say(f"failed ({view.state}): {view.reason}")
    return EXIT_FAILED


def cmd_local(args: argparse.Namespace) -> int:
    from fleetctl.local.paths import LocalPaths
    from fleetctl.local.supervisor import LocalStack

    stack = LocalStack(LocalPaths.discover(args.state_dir, env=os.environ), say)
    if args.local_command == "up":
        state = stack.up(
            UpOptions(
                workers=args.workers,
                max_workers=args.max_workers,
                backlog_per_worker=args.backlog_per_worker,
                port=args.port,
                stack=args.stack,
                default_engine=args.default_engine,
                visibility_s=args.visibility_seconds,
                accepted_backlog_s=args.accepted_backlog_seconds,
                render_concurrency=args.render_concurrency,
                tenant_max_running_jobs=args.tenant_max_running_jobs,
                tenant_max_segments=args.tenant_max_segments,
                watchdog_every_s=args.watchdog_every,
                watchdog_stall_s=args.watchdog_stall_seconds,
                watchdog_dispatch_grace_s=args.watchdog_dispatch_grace_seconds,
                backups=args.backups,
                backup_factor=args.backup_factor,
                backup_min_age_s=args.backup_min_age_seconds,
                backup_done_fraction=args.backup_done_fraction,
                backup_last_segments=args.backup_last_segments,
                faults_file=args.faults_file,
                dashboard_port=args.dashboard_port,
                api_port=args.api_port,
            )
        )
        print(state.endpoint, flush=True)
        return 0
    if args.local_command == "down":
        stack.down()
        return 0
    if args.local_command == "webhook-secret":
        return tenant_cli.cmd_webhook_secret(args)
    if args.local_command == "token":
        print(stack.token(args.tenant, args.ttl), flush=True)
        return 0
    print("\n".join(stack.status()))
    return 0


def cmd_dashboard(args: argparse.Namespace) -> int:
    conn = connection.resolve(args.endpoint_url, args.region, args.stack, env=os.environ)
    outputs = stack_outputs(conn.aws.client("cloudformation"), conn.stack_name)
    bucket, files = publish.site_for(outputs)
    publish.upload(conn.aws.client("s3"), bucket, files)
    for item in files:
        say(f"uploaded s3://{bucket}/{item.key} ({item.content_type}, {len(item.body)} bytes)")
    print(outputs["DashboardUrl"], flush=True)
    return 0


BATCH_COMMANDS = {"status": cmd_batch_status, "cancel": cmd_batch_cancel, "retry": cmd_batch_retry}
COMMANDS = {
    "subscribe": cmd_subscribe,
    "dashboard": cmd_dashboard,
    "list": cmd_list,
    "cancel": cmd_cancel,
    "retry": cmd_retry,
    "logs": cmd_logs,
    "workers": cmd_workers,
    "tenant": tenant_cli.cmd_tenant,
    "aws": preflight_command.run,
    "try": cmd_try,
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["swap"]:
        # The single-machine render runs the worker's own engine code, in the worker package.
        os.execv(sys.executable, [sys.executable, "-m", "gpu_worker", "swap", *argv[1:]])
    args = build_parser().parse_args(argv)
    try:
        if args.command == "submit":
            return cmd_submit(args)
        if args.command in BATCH_COMMANDS and is_batch_id(args, args.job_id):
            return BATCH_COMMANDS[args.command](args)
        if args.command == "status":
            return cmd_status(args)
        if args.command in COMMANDS:
            return COMMANDS[args.command](args)
        return cmd_local(args)
    except OptionsError as error:
        say("invalid options: " + "; ".join(error.problems))
        return EXIT_REJECTED
    except ApiError as error:
        say(f"error: {error.reason}")
        return EXIT_REJECTED if error.status == 400 else EXIT_FAILED
    except FusionFleetError as error:
        say(f"error: {error.reason}")
        return EXIT_FAILED
    except (RuntimeError, TimeoutError, FileNotFoundError, ValueError) as error:
        say(f"error: {error}")
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())

"""`fusionfleet`: run the local stack, submit jobs, follow them, and render on this machine."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import TypeAlias, cast

from fleetctl import action_wait, api_commands, connection, estimate_commands, tenant_cli
from fleetctl.api_client import ApiError
from fleetctl.batch_commands import (
    batch_client_of,
    cmd_batch_cancel,
    cmd_batch_retry,
    cmd_batch_status,
    is_batch_id,
)
from fleetctl.dashboard import publish
from fleetctl.exits import EPILOG, Exit, UsageError, of_state
from fleetctl.job_commands import (
    cmd_cancel,
    cmd_list,
    cmd_logs,
    cmd_retry,
    cmd_status,
    cmd_workers,
    print_json,
    say,
)
from fleetctl.local.processes import UpOptions
from fleetctl.parsing import FleetParser
from fleetctl.preflight import command as preflight_command
from fleetctl.stack import stack_outputs
from fleetctl.submit_commands import add_parsers as add_submit_parsers
from fleetctl.submit_commands import cmd_download, cmd_submit, cmd_wait
from fleetctl.subscriptions import PROTOCOLS, check_tenant, subscribe
from fleetctl.try_commands import add_parser as add_try_parser
from fleetctl.try_commands import cmd_try
from fusionfleet.errors import FusionFleetError, JobNotFound, JobRejected
from fusionfleet.facefusion.options import FACEFUSION_VERSION, OptionsError
from fusionfleet.fleet.tenants import notice_tenant
from fusionfleet.fleet.workers import DEFAULT_LOST_AFTER_S
from fusionfleet.jobs.batch_views import item_json
from fusionfleet.jobs.ids import tenant_of_job
from fusionfleet.jobs.manifest import ENGINE_NAMES
from fusionfleet.jobs.states import JobState
from fusionfleet.jobs.timeouts import DEFAULT_VISIBILITY_S
from fusionfleet.jobs.views import view_json


def _add_connection(parser: argparse.ArgumentParser) -> None:
    connection.add_arguments(parser)


Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
# Keeps the exit statuses' lines (the epilog) as written.
_Formatter = argparse.RawDescriptionHelpFormatter


def _add_json(parser: argparse.ArgumentParser, shape: str) -> None:
    parser.add_argument("--json", action="store_true", help=f"one JSON document on stdout: {shape}")


def _version() -> str:
    try:
        return metadata.version("fusionfleet")
    except metadata.PackageNotFoundError:  # a checkout run without installing it
        return "unknown"


def _job_command(commands: Commands, name: str, help: str) -> argparse.ArgumentParser:
    """A command that reads or steers jobs: its help ends with the exit statuses."""
    parser: argparse.ArgumentParser = commands.add_parser(name, help=help, epilog=EPILOG, formatter_class=_Formatter)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = FleetParser(prog="fusionfleet", description=__doc__, epilog=EPILOG, formatter_class=_Formatter)
    parser.add_argument(
        "--version", action="version", version=f"fusionfleet {_version()} (FaceFusion {FACEFUSION_VERSION})"
    )
    # Its subparsers are FleetParsers too (argparse makes them of the parser's class); the commands'
    # modules ask only for ArgumentParsers.
    commands = cast(Commands, parser.add_subparsers(dest="command", required=True))

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

    add_submit_parsers(commands, _add_connection)
    estimate_commands.add_parser(commands, commands.choices["submit"])
    add_try_parser(commands, _add_connection)

    status = _job_command(commands, "status", "state, segments done/failed/total, output location (or a batch's items)")
    status.add_argument("job_id", help="a job's or a batch's id")
    status.add_argument("--tenant", help="only if the job is this tenant's")
    _add_json(status, "GET /api/jobs/{id}'s `job` (the dashboard's API); with --api, GET /jobs/{id}'s answer")
    api_commands.add_arguments(status)
    _add_connection(status)

    listing = _job_command(commands, "list", "recent jobs: state, priority, segments done/total, age, output")
    listing.add_argument("--state", choices=list(JobState), help="only jobs in this state")
    listing.add_argument("--limit", type=int, default=20, help="at most this many jobs, newest first (default 20)")
    listing.add_argument("--tenant", help="only this tenant's jobs ('-': only single-tenant jobs)")
    _add_json(listing, "GET /api/jobs's answer (the dashboard's API); with --api, GET /jobs's")
    api_commands.add_arguments(listing)
    _add_connection(listing)

    cancel = _job_command(commands, "cancel", "stop a running job or batch; it ends CANCELLED with a notice")
    cancel.add_argument("job_id", help="a job's, a batch's or one batch item's id")
    action_wait.add_arguments(cancel, downloads=False)
    api_commands.add_arguments(cancel)
    _add_connection(cancel)

    retry = _job_command(
        commands,
        "retry",
        "run a failed or cancelled job again, only its missing segments (a batch: its unsuccessful items)",
    )
    retry.add_argument("job_id", help="a job's, a batch's or one batch item's id")
    action_wait.add_arguments(retry, downloads=True)
    api_commands.add_arguments(retry)
    _add_connection(retry)

    logs = _job_command(commands, "logs", "what each attempt of each segment did")
    logs.add_argument("job_id")
    logs.add_argument("--segment", type=int, help="only this segment")
    _add_json(logs, "the tenant API's GET /jobs/{id}/logs answer: the job's id and every attempt")
    api_commands.add_arguments(logs)
    _add_connection(logs)

    workers = commands.add_parser("workers", help="the workers, their current segment and last heartbeat")
    workers.add_argument(
        "--lost-after", type=float, default=DEFAULT_LOST_AFTER_S,
        help=f"a worker silent this many seconds is shown as lost (default {DEFAULT_LOST_AFTER_S:.0f})",
    )  # fmt: skip
    _add_json(workers, "GET /api/workers's answer (the dashboard's API)")
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
    conn = connection.of_args(args, os.environ)
    option = next(name for name in PROTOCOLS if getattr(args, name))
    found = subscribe(
        conn.aws.client("sns"), conn.resources().topic_arn, args.tenant, PROTOCOLS[option], getattr(args, option)
    )
    say(f"{found.endpoint} now receives the notices of tenant {found.tenant}")
    print(found.arn)
    return 0


def up_options(args: argparse.Namespace) -> UpOptions:
    """What `local up`'s flags ask for (a test holds the settings table's `local up` flags to it)."""
    return UpOptions(
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


def cmd_local(args: argparse.Namespace) -> int:
    from fleetctl.local.paths import LocalPaths
    from fleetctl.local.supervisor import LocalStack

    stack = LocalStack(LocalPaths.discover(args.state_dir, env=os.environ), say)
    if args.local_command == "up":
        state = stack.up(up_options(args))
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
    conn = connection.of_args(args, os.environ)
    outputs = stack_outputs(conn.aws.client("cloudformation"), conn.stack_name)
    bucket, files = publish.site_for(outputs)
    publish.upload(conn.aws.client("s3"), bucket, files)
    for item in files:
        say(f"uploaded s3://{bucket}/{item.key} ({item.content_type}, {len(item.body)} bytes)")
    print(outputs["DashboardUrl"], flush=True)
    return 0


def cmd_batch_status_json(args: argparse.Namespace) -> int:
    """`status --json` of a batch: GET /api/jobs/{id}'s `job` and `items` (the dashboard's API)."""
    if args.tenant and notice_tenant(tenant_of_job(args.job_id)) != check_tenant(args.tenant):
        raise JobNotFound(f"no batch {args.job_id!r} of tenant {args.tenant}")
    detail = batch_client_of(args).detail(args.job_id)
    items = [item_json(item) for item in detail.items]
    print_json({"now": datetime.now(UTC), "job": view_json(detail.batch), "items": items})
    return of_state(detail.batch.state)


BATCH_COMMANDS = {"status": cmd_batch_status, "cancel": cmd_batch_cancel, "retry": cmd_batch_retry}
COMMANDS = {
    "submit": cmd_submit,
    "estimate": estimate_commands.cmd_estimate,
    "wait": cmd_wait,
    "download": cmd_download,
    "status": cmd_status,
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


def _dispatch(args: argparse.Namespace) -> int:
    through_api = api_commands.run(args)  # --api: the tenant API, never the stack's own resources
    if through_api is not None:
        return through_api
    if args.command == "submit" and args.confirm and not estimate_commands.confirmed(args):
        return Exit.FAILED  # nothing was uploaded
    if args.command == "status" and args.json and is_batch_id(args, args.job_id):
        return cmd_batch_status_json(args)
    if args.command in BATCH_COMMANDS and is_batch_id(args, args.job_id):
        return BATCH_COMMANDS[args.command](args)
    if args.command in COMMANDS:
        return COMMANDS[args.command](args)
    return cmd_local(args)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["swap"]:
        # The single-machine render runs the worker's own engine code, in the worker package.
        os.execv(sys.executable, [sys.executable, "-m", "gpu_worker", "swap", *argv[1:]])
    args = build_parser().parse_args(argv)
    try:
        code = _dispatch(args)
        action_wait.note_unused_output(args)
        if code == Exit.DONE and getattr(args, "wait", False) and args.command in ("cancel", "retry"):
            return action_wait.follow_up(args, _dispatch)
        return code
    except UsageError as error:
        say(f"fusionfleet {args.command}: error: {error.reason}")
        return Exit.USAGE
    except OptionsError as error:
        # The same options the farm would refuse, refused before any upload: the job is rejected.
        say("rejected: invalid options: " + "; ".join(error.problems))
        return Exit.REJECTED
    except JobRejected as error:
        say(f"rejected: {error.reason}")
        return Exit.REJECTED
    except ApiError as error:
        say(f"error: {error.reason}")
        return Exit.REJECTED if error.status == 400 else Exit.FAILED
    except FusionFleetError as error:
        say(f"error: {error.reason}")
        return Exit.FAILED
    except (RuntimeError, TimeoutError, FileNotFoundError, ValueError) as error:
        say(f"error: {error}")
        return Exit.FAILED


if __name__ == "__main__":
    sys.exit(main())

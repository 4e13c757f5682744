"""The CLI's commands that read and steer jobs and workers (`status`, `list`, `logs`, `workers`, `cancel`,
`retry`), and what every command of `fleetctl.cli` shares: where messages go and the stack's clients from
the connection flags. They render the read model's views (`fusionfleet.jobs`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime

from botocore.exceptions import BotoCoreError, ClientError

from fleetctl import admission, connection
from fleetctl.client import Client
from fleetctl.exits import Exit, of_state
from fleetctl.local.engines import check_engine
from fleetctl.notices import SqsNoticeInbox
from fleetctl.subscriptions import check_tenant
from fleetctl.tables import duration, table
from fleetctl.tenant_cli import print_cost, print_deliveries
from fusionfleet.adapters.orchestrator import StepFunctions
from fusionfleet.adapters.storage import S3Storage
from fusionfleet.errors import JobNotFound
from fusionfleet.fleet.tenants import notice_tenant
from fusionfleet.fleet.workers import worker_views
from fusionfleet.jobs.engine_options import check_engine_options
from fusionfleet.jobs.ids import tenant_of_job
from fusionfleet.jobs.reader import JobReader
from fusionfleet.jobs.states import JobState
from fusionfleet.jobs.views import AttemptView, JobView, view_json
from fusionfleet.json_http import plain
from fusionfleet.progress import ProgressLine
from fusionfleet.services.operations import Operations

# Kept for the batch commands until they name `Exit` themselves; the statuses are defined in fleetctl.exits.
EXIT_TIMEOUT = Exit.GAVE_UP


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def print_json(value: object) -> None:
    """One JSON document on stdout: what the matching HTTP API answers (fusionfleet.json_http.plain)."""
    print(json.dumps(plain(value), indent=2), flush=True)


def connect(args: argparse.Namespace) -> connection.Connection:
    """The stack the command's flags and environment name (which one said on stderr where both were meant)."""
    return connection.of_args(args, os.environ)


def client_of(args: argparse.Namespace) -> Client:
    conn = connect(args)
    resources = conn.resources()
    return Client(S3Storage(conn.aws.client("s3")), StepFunctions(conn.aws.client("stepfunctions")), resources)


def check_local_engine(args: argparse.Namespace, options: dict[str, object] | None = None) -> None:
    """Before any upload: on the local stack, a job for an engine none of its workers runs is refused; and
    where the engine is known (asked for, or the local stack's default), options it would not apply are
    refused with the slicer's own reasons (fusionfleet.jobs.engine_options), not after the job is queued."""
    local = connection.local_stack(args.endpoint_url, os.environ, args.where, args.profile)
    if local is not None:
        check_engine(args.engine, local.default_engine, tuple(local.engines))
    engine = args.engine or (local.default_engine if local is not None else None)
    if engine is not None and options is not None:
        check_engine_options(engine, options)


def notice_inbox_of(args: argparse.Namespace, job_id: str) -> SqsNoticeInbox | None:
    """An inbox for the job's notice; None (wait by polling) where this identity may not make one."""
    conn = connect(args)
    try:
        return SqsNoticeInbox.open(conn.aws.client("sqs"), conn.aws.client("sns"), conn.resources().topic_arn, job_id)
    except (BotoCoreError, ClientError) as error:
        say(f"following the job by polling (no notice queue: {error})")
        return None


def follow(client: Client, args: argparse.Namespace, job_id: str, describe: Callable[[JobView], str]) -> JobView:
    """Wait for the job to end (its notice where this identity may read one, else polling), one progress line."""
    line = ProgressLine()
    inbox = notice_inbox_of(args, job_id)
    try:
        view = client.wait(job_id, args.timeout, lambda current: line.show(describe(current)), notices=inbox)
    finally:
        if inbox is not None:
            inbox.close()
    line.done()
    return view


def operations_of(args: argparse.Namespace) -> Operations:
    """Cancel and retry; a tenant's retried job is admitted at once with the stack's limits (fleetctl.admission)."""
    return admission.operations(connect(args), os.environ)


def reader_of(args: argparse.Namespace) -> JobReader:
    conn = connect(args)
    resources = conn.resources()
    return JobReader(
        S3Storage(conn.aws.client("s3")), StepFunctions(conn.aws.client("stepfunctions")),
        resources.work_bucket, resources.state_machine_arn,
    )  # fmt: skip


def _age(when: datetime | None, now: float) -> str:
    return duration(now - when.timestamp()) if when else "-"


def _segments(job: JobView) -> str:
    counts = job.segments
    if not counts.total:
        return "-"
    return f"{counts.done}/{counts.total}" + (f" ({counts.failed} failed)" if counts.failed else "")


def cmd_list(args: argparse.Namespace) -> int:
    tenant = check_tenant(args.tenant) if args.tenant else None
    jobs = reader_of(args).list_jobs(args.state, args.limit, tenant)
    if args.json:  # the dashboard API's GET /api/jobs
        print_json({"now": datetime.now(UTC), "state": args.state, "limit": args.limit,
                    "jobs": [view_json(job) for job in jobs]})  # fmt: skip
        return 0
    if not jobs:
        say("no jobs" + (f" in state {args.state}" if args.state else "") + (f" of tenant {tenant}" if tenant else ""))
        return 0
    now = time.time()
    rows = [
        (
            job.job_id,
            job.state,
            job.priority or "-",
            _segments(job),
            _age(job.submitted_at, now),
            job.output or job.reason,
        )
        for job in jobs
    ]
    print("\n".join(table(("JOB", "STATE", "PRIORITY", "SEGMENTS", "AGE", "OUTPUT / REASON"), rows)))
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    print(operations_of(args).cancel(args.job_id))
    return 0


def cmd_retry(args: argparse.Namespace) -> int:
    print(operations_of(args).retry(args.job_id))
    return 0


def _clock(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%H:%M:%S") if epoch else "-"


def cmd_logs(args: argparse.Namespace) -> int:
    attempts = reader_of(args).logs(args.job_id, args.segment)
    if args.json:  # the tenant API's GET /jobs/{id}/logs
        print_json({"job_id": args.job_id, "attempts": plain(attempts)})
        return 0
    if print_attempts(attempts, args.segment):
        print_deliveries(reader_of(args).deliveries(args.job_id))
    return 0


def print_attempts(attempts: list[AttemptView], segment: int | None) -> bool:
    """`logs`' table of attempts (through the stack or the API); False when there are none."""
    if not attempts:
        say("no attempts recorded" + (f" for segment {segment}" if segment is not None else "") + " yet")
        return False
    rows = [
        (
            item.segment, item.attempt, item.worker or "-",
            f"{item.status} (backup copy)" if item.copy_number else item.status, _clock(item.started_at),
            _clock(item.finished_at), f"{item.finished_at - item.started_at:.1f}s" if item.finished_at else "-",
            f"{item.engine_s:.2f}s", ": ".join(part for part in (item.error, item.reason) if part),
        )
        for item in attempts
    ]  # fmt: skip
    headers = ("SEGMENT", "ATTEMPT", "WORKER", "STATUS", "STARTED", "FINISHED", "TOOK", "ENGINE", "ERROR")
    print("\n".join(table(headers, rows, right=(0, 1, 6, 7))))
    return True


def cmd_workers(args: argparse.Namespace) -> int:
    conn = connect(args)
    workers = worker_views(S3Storage(conn.aws.client("s3")), conn.resources().work_bucket, time.time(), args.lost_after)
    if args.json:  # the dashboard API's GET /api/workers
        print_json({"now": datetime.now(UTC), "workers": workers})
        return 0
    if not workers:
        say("no workers have a presence record")
        return 0
    now = time.time()
    rows = [
        (
            worker.name, worker.role, worker.engine or "-", worker.current or "-", worker.segments_done,
            f"{_age(worker.last_heartbeat, now)} ago", "LOST" if worker.lost else "alive",
        )
        for worker in workers
    ]  # fmt: skip
    print("\n".join(table(("NAME", "ROLE", "ENGINE", "CURRENT", "DONE", "LAST BEAT", "STATE"), rows, right=(4,))))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    if args.tenant and notice_tenant(tenant_of_job(args.job_id)) != check_tenant(args.tenant):
        # As if it did not exist: a tenant learns nothing about other tenants' jobs.
        raise JobNotFound(f"no job {args.job_id!r} of tenant {args.tenant}")
    view = client_of(args).status(args.job_id)
    if args.json:  # the dashboard API's GET /api/jobs/{id}: its `job`
        print_json({"now": datetime.now(UTC), "job": view_json(view)})
        return of_state(view.state)
    print(f"job       {view.job_id}")
    print(f"state     {view.state}")
    if view.targets:  # not yet sliced: what its manifest says of it
        print(f"name      {view.name}")
        print(f"priority  {view.priority}")
        for target in view.targets:
            print(f"target    {target}")
    counts = view.segments
    if counts.total:
        print(
            f"segments  {counts.done} done, {counts.failed} failed, {counts.running} running, "
            f"{counts.pending} pending, {counts.total} total"
        )
    if view.analysis is not None:
        read = view.analysis
        print(
            f"analysis  {read.percent:.0f} % of the target read ({read.frames_read} of {read.frame_count} frames, "
            f"{read.sampled} analysed) on {read.worker or 'a worker'}; its segments start after it"
        )
    if view.result is not None:
        print(f"output    {view.result.uri}")
    if view.download is not None:
        # Signed now, with the caller's credentials: the notice's link may have ended already.
        print(f"download  {view.download.url}")
        print(f"expires   {view.download.expires_at_iso}")
    if view.reason:
        print(f"reason    {view.reason}")
    if view.state not in (JobState.REJECTED, JobState.PENDING):
        print_cost(reader_of(args).detail(args.job_id).cost)
    return of_state(view.state)

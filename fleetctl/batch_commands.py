"""The CLI's batch commands: `submit` with several targets (or a folder, or a glob), and `status`, `cancel`
and `retry` given a batch's id. They render the read model's batch views (`fusionfleet.jobs.batch_views`)."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from fleetctl import connection
from fleetctl.batch_client import BatchClient, target_files
from fleetctl.exits import of_state
from fleetctl.job_commands import EXIT_TIMEOUT, notice_inbox_of, operations_of, reader_of, say
from fleetctl.subscriptions import check_tenant
from fleetctl.tables import table
from fusionfleet.adapters.orchestrator import StepFunctions
from fusionfleet.adapters.storage import S3Storage
from fusionfleet.errors import JobNotFound
from fusionfleet.facefusion.flags import collect_facefusion_options
from fusionfleet.fleet.tenants import notice_tenant
from fusionfleet.jobs.batch_reader import BatchReader
from fusionfleet.jobs.batch_views import BatchDetail, ItemView
from fusionfleet.jobs.ids import tenant_of_job
from fusionfleet.progress import ProgressLine, bar
from fusionfleet.services.batch_operations import BatchOperations


def batch_client_of(args: argparse.Namespace) -> BatchClient:
    conn = connection.of_args(args, os.environ)
    resources = conn.resources()
    storage, orchestrator = S3Storage(conn.aws.client("s3")), StepFunctions(conn.aws.client("stepfunctions"))
    return BatchClient(
        storage, orchestrator, resources.media_bucket, resources.work_bucket, resources.state_machine_arn
    )


def is_batch_id(args: argparse.Namespace, job_id: str) -> bool:
    """A batch's id, opened by the slicer or only accepted (its `status` is then PENDING, not unknown)."""
    return BatchReader(reader_of(args)).is_batch(job_id)


def cmd_submit_batch(args: argparse.Namespace) -> int:
    targets = target_files(args.target)
    client = batch_client_of(args)
    submission = client.submit(
        args.source, targets, args.priority, args.engine, args.quality, args.reference,
        collect_facefusion_options(args), args.name, say, tenant=args.tenant, item_notices=args.item_notices,
    )  # fmt: skip
    say(f"batch {submission.batch_id}: {submission.targets} items")
    code = 0
    if args.wait:
        code = _wait(
            args, client, submission.batch_id, args.output_dir or Path.cwd() / Path(submission.output_prefix).name
        )
    print(submission.batch_id, flush=True)
    return code


def _describe(detail: BatchDetail) -> str:
    batch = detail.batch
    items = batch.items
    return f"{batch.state} {bar(items.done, items.total)} {items.done}/{items.total} items" + (
        f", {items.failed} unsuccessful" if items.failed else ""
    )


def _wait(args: argparse.Namespace, client: BatchClient, batch: str, folder: Path) -> int:
    """Follow the batch to its summary notice (or poll), then fetch every succeeded item's output."""
    line = ProgressLine()
    inbox = notice_inbox_of(args, batch)
    deadline = time.monotonic() + args.timeout
    try:
        while True:
            detail = client.detail(batch)
            line.show(_describe(detail))
            if detail.batch.ended or time.monotonic() > deadline:
                break
            if inbox is None or inbox.next_notice(min(5.0, deadline - time.monotonic())) is None:
                time.sleep(1.0 if inbox is None else 0.0)
    finally:
        if inbox is not None:
            inbox.close()
    line.done()
    if not detail.batch.ended:
        say(f"gave up waiting: still {detail.batch.state} after {args.timeout:.0f} s")
        return EXIT_TIMEOUT
    written = client.download(detail, folder, say)
    say(f"{detail.batch.state.lower()}: {len(written)} of {detail.batch.items.total} outputs in {folder}")
    if detail.batch.reason:
        say(detail.batch.reason)
    return of_state(detail.batch.state)  # a batch the slicer refused (it reads REJECTED now, not unknown): 3


def _item_row(item: ItemView) -> tuple[object, ...]:
    job = item.job
    if job is None:
        return (item.index, item.job_id, "NOT STARTED", "-", item.target, "")
    segments = f"{job.segments.done}/{job.segments.total}" if job.segments.total else "-"
    return (item.index, item.job_id, job.state, segments, item.target, job.output or job.reason)


def cmd_batch_status(args: argparse.Namespace) -> int:
    if args.tenant and notice_tenant(tenant_of_job(args.job_id)) != check_tenant(args.tenant):
        raise JobNotFound(f"no batch {args.job_id!r} of tenant {args.tenant}")  # as `status` does for a job
    detail = batch_client_of(args).detail(args.job_id)
    batch = detail.batch
    print(f"batch     {batch.job_id}")
    print(f"state     {batch.state}")
    items = batch.items
    print(f"items     {items.done} succeeded, {items.failed} unsuccessful, {items.running} running, "
          f"{items.pending} waiting, {items.total} total")  # fmt: skip
    if batch.output:
        print(f"output    {batch.output}")
    if batch.reason:
        print(f"reason    {batch.reason}")
    rows = [_item_row(item) for item in detail.items]
    print("\n".join(table(("ITEM", "JOB", "STATE", "SEGMENTS", "TARGET", "OUTPUT / REASON"), rows, right=(0,))))
    return of_state(batch.state)


def cmd_batch_cancel(args: argparse.Namespace) -> int:
    print(BatchOperations(operations_of(args)).cancel(args.job_id))
    return 0


def cmd_batch_retry(args: argparse.Namespace) -> int:
    print(BatchOperations(operations_of(args)).retry(args.job_id))
    return 0

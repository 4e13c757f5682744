"""The CLI's tenant and webhook commands: `tenant set|show`, `local webhook-secret`, and `submit`'s
webhook options. Kept apart from cli.py, which registers them."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fleetctl import connection
from fleetctl.local.paths import LocalPaths
from fleetctl.local.processes import webhook_secret_prefix
from fleetctl.local.supervisor import LocalStack
from fleetctl.stack import StackResources
from fleetctl.tables import table
from fusionfleet.adapters.orchestrator import StepFunctions
from fusionfleet.adapters.secrets import SecretsManagerStore
from fusionfleet.adapters.storage import S3Storage
from fusionfleet.errors import FusionFleetError
from fusionfleet.fleet.tenant_settings import BUDGET_ACTIONS, read_settings, write_settings
from fusionfleet.fleet.tenants import TenantLimits, check_tenant_name
from fusionfleet.jobs.manifest import PRIORITIES
from fusionfleet.services.tenant_overview import tenant_overview
from fusionfleet.webhooks.events import EVENT_KINDS
from fusionfleet.webhooks.records import DeliveryRecord
from fusionfleet.webhooks.secrets import TenantSecrets, secret_name

NONE_WORDS = ("none", "default", "unset")


def _connection_arguments(parser: argparse.ArgumentParser) -> None:
    connection.add_arguments(parser)


def _count(text: str) -> int | None:
    if text.lower() in NONE_WORDS:
        return None
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is below 0")
    return value


def _dollars(text: str) -> float | None:
    if text.lower() in NONE_WORDS:
        return None
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a number of dollars")
    return value


def _priority(text: str) -> str | None:
    if text.lower() in NONE_WORDS:
        return None
    if text not in PRIORITIES:
        raise argparse.ArgumentTypeError(f"{text} is not one of {', '.join(PRIORITIES)} (or none)")
    return text


def add_commands(commands: Any) -> None:
    tenant = commands.add_parser("tenant", help="a tenant's limits, budget, jobs and spend").add_subparsers(
        dest="tenant_command", required=True
    )
    settings = tenant.add_parser("set", help="set a tenant's limits and budget ('none': back to the stack's)")
    settings.add_argument("tenant")
    # Left out: unchanged (argparse.SUPPRESS leaves no attribute); 'none': back to the stack's.
    unset = argparse.SUPPRESS
    settings.add_argument(
        "--max-running-jobs", type=_count, default=unset, help="jobs at once (0: no limit); more wait their turn"
    )
    settings.add_argument(
        "--max-segments", type=_count, default=unset, help="segments in flight, shared among its jobs (0: no limit)"
    )
    settings.add_argument(
        "--max-priority", type=_priority, default=unset, help=f"the highest priority it may submit {PRIORITIES}"
    )
    settings.add_argument(
        "--monthly-budget-usd", type=_dollars, default=unset, help="dollars a month; once spent, its work stops"
    )
    settings.add_argument(
        "--on-budget", choices=BUDGET_ACTIONS, default=unset, help="stop: hold its jobs; cancel: cancel them"
    )
    _connection_arguments(settings)
    show = tenant.add_parser("show", help="a tenant's settings, running and waiting jobs, and spend this month")
    show.add_argument("tenant")
    show.add_argument("--json", action="store_true", help="as JSON")
    _connection_arguments(show)


def add_local_commands(local: Any) -> None:
    secret = local.add_parser("webhook-secret", help="print a tenant's whsec_ webhook signing secret (made if none)")
    secret.add_argument("--tenant", help="the tenant (default: the stack's single-tenant jobs/ drops)")
    secret.add_argument("--state-dir", type=Path, help="the local stack's state directory")


def add_submit_arguments(submit: argparse.ArgumentParser) -> None:
    submit.add_argument("--webhook", help="a URL that receives the job's events, signed (Standard Webhooks)")
    submit.add_argument(
        "--webhook-events", help=f"comma-separated events to send (default all: {','.join(EVENT_KINDS)})"
    )
    submit.add_argument("--metadata", help="a JSON object of your own, echoed back in every event")


def webhook_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The manifest's webhook fields from `submit`'s options (checked again by the slicer)."""
    fields: dict[str, Any] = {}
    if args.webhook:
        fields["webhook"] = args.webhook
    if args.webhook_events:
        fields["webhook_events"] = [part.strip() for part in args.webhook_events.split(",") if part.strip()]
    if args.metadata:
        try:
            fields["metadata"] = json.loads(args.metadata)
        except ValueError as error:
            raise FusionFleetError(f"--metadata is not JSON: {error}") from error
    return fields


def cmd_tenant(args: argparse.Namespace) -> int:
    check_tenant_name(args.tenant)
    conn = connection.of_args(args, os.environ)
    resources = conn.resources()
    storage = S3Storage(conn.aws.client("s3"))
    if args.tenant_command == "set":
        current = read_settings(storage, resources.work_bucket, args.tenant)
        changes = {
            name: getattr(args, name)
            for name in ("max_running_jobs", "max_segments", "max_priority", "monthly_budget_usd", "on_budget")
            if hasattr(args, name)
        }
        # The stack's own limits are checked by the slicer; here only that the tenant's fit together.
        stored = write_settings(storage, resources.work_bucket, current.model_copy(update=changes), TenantLimits())
        print(stored.model_dump_json(indent=2))
        return 0
    overview = tenant_overview(
        storage, StepFunctions(conn.aws.client("stepfunctions")), resources.work_bucket, resources.state_machine_arn,
        args.tenant, time.time(),
    )  # fmt: skip
    if args.json:
        print(json.dumps(overview.as_dict(), indent=2))
        return 0
    settings = overview.settings

    def shown(value: object, default: str = "the stack's") -> str:
        return default if value is None else str(value)

    cap = settings.monthly_budget_usd
    spent = f"${overview.spend.spent_usd:.4f}" + ("  OVER BUDGET" if overview.spend.over else "")
    lines = [
        f"tenant            {overview.tenant}",
        f"max running jobs  {shown(settings.max_running_jobs)}",
        f"max segments      {shown(settings.max_segments)}",
        f"max priority      {shown(settings.max_priority, 'any')}",
        "monthly budget    " + ("none" if cap is None else f"${cap:.4f} (on reaching it: {settings.on_budget})"),
        f"spent {overview.spend.month}  {spent}",
        f"running           {', '.join(overview.running) or '-'}",
        "waiting           " + ("-" if not overview.waiting else ""),
        *(f"  {job.position}. {job.job_id}{' (held)' if job.held else ''}: {job.reason}" for job in overview.waiting),
    ]
    print("\n".join(lines))
    return 0


def cmd_webhook_secret(args: argparse.Namespace) -> int:
    """The local stack's secret of a tenant (made if it has none), alone on stdout."""
    if args.tenant:
        check_tenant_name(args.tenant)
    state = LocalStack(LocalPaths.discover(args.state_dir, env=os.environ), lambda _line: None).load()
    if state is None or not state.outputs:
        raise FusionFleetError("no local stack is running (fusionfleet local up starts one)")
    StackResources.from_outputs(state.outputs)  # a FusionFleet stack
    conn = connection.resolve(state.endpoint, state.region, state.stack, env=os.environ)
    store = SecretsManagerStore(conn.aws.client("secretsmanager"))
    secret = TenantSecrets(store, webhook_secret_prefix(state.stack)).secret_for(args.tenant)
    print(f"{secret_name(webhook_secret_prefix(state.stack), args.tenant)}", file=sys.stderr)
    print(str(secret), flush=True)
    return 0


def print_deliveries(records: list[DeliveryRecord]) -> None:
    """`fusionfleet logs`' second table: each webhook event and every attempt to deliver it."""
    if not records:
        return
    rows: list[tuple[object, ...]] = []
    for record in records:
        what = f"{record.sequence or '-'} {record.kind}"
        if not record.attempts:
            rows.append((what, "-", "-", "-", "-", record.state, record.reason))
        for attempt in record.attempts:
            clock = datetime.fromtimestamp(attempt.at, UTC).strftime("%H:%M:%S")
            answer = str(attempt.status) if attempt.status is not None else "no answer"
            last = attempt.number == len(record.attempts)
            outcome = record.state if last else "retried"
            why = (attempt.error or (record.reason if last else ""))[:80]
            rows.append((what, attempt.number, clock, answer, f"{attempt.duration_s:.2f}s", outcome, why))
    print()
    headers = ("WEBHOOK EVENT", "ATTEMPT", "AT", "ANSWER", "TOOK", "OUTCOME", "DETAIL")
    print("\n".join(table(headers, rows, right=(1, 4))))


def print_cost(cost: dict[str, Any] | None) -> None:
    """`fusionfleet status`' cost line: every attempt at its worker's price (fusionfleet.jobs.cost)."""
    if not cost:
        return
    split = ", ".join(f"{name} ${usd:.6f}" for name, usd in sorted(cost.get("usd_by_capacity", {}).items()))
    print(
        f"cost      ${cost['estimated_usd']:.6f}{'' if cost.get('final') else ' so far'}: "
        f"{cost['billed_gpu_s']:.3f} GPU-s over {cost.get('attempts', 0)} attempts"
        f" (wasted ${cost.get('wasted_usd', 0.0):.6f}{'; ' + split if split else ''})"
    )

"""The stack's admission limits, for the CLI and the dashboard: a tenant's job they retry is queued in its
tenant's line and admitted at once with the limits the stack's own admitters use (the same lease, slots
and budget hold: `fusionfleet.services.admission`), so a tenant below its limit runs it right away.

Where they come from: the local stack's state file (what `local up` gave its slicer, watchdog and notice
follower; a LocalStack endpoint without such a state gets none), or on AWS the stack's parameters
`TenantMaxRunningJobs` and `TenantMaxSegments` (the template passes them to every function that admits;
it sets no stack-wide `MAX_RUNNING_JOBS`, so 0). A stack whose limits cannot be read (deployed without
those parameters, a local state written before it recorded them) gets None: the job waits for the next
admission, and the retry says so.
"""

from __future__ import annotations

from collections.abc import Mapping

from botocore.exceptions import BotoCoreError, ClientError

from fleetctl.connection import Connection, local_stack
from fleetctl.stack import StackResources
from fusionfleet.adapters.notify import SnsNotifier
from fusionfleet.adapters.orchestrator import StepFunctions
from fusionfleet.adapters.ordered_queue import SqsOrderedQueue
from fusionfleet.adapters.storage import S3Storage
from fusionfleet.fleet.tenants import TenantLimits
from fusionfleet.services.admission import AdmissionConfig
from fusionfleet.services.operations import Operations
from fusionfleet.webhooks.outbox import WebhookOutbox

# The template's parameters behind TENANT_MAX_RUNNING_JOBS and TENANT_MAX_SEGMENTS.
TENANT_JOBS_PARAMETER = "TenantMaxRunningJobs"
TENANT_SEGMENTS_PARAMETER = "TenantMaxSegments"


def limits_of_parameters(parameters: Mapping[str, str]) -> AdmissionConfig | None:
    """(bucket and machine left empty) The limits a deployed stack's parameters give; None if absent."""
    try:
        limits = TenantLimits(int(parameters[TENANT_JOBS_PARAMETER]), int(parameters[TENANT_SEGMENTS_PARAMETER]))
    except (KeyError, ValueError):
        return None
    return AdmissionConfig("", "", stack_limits=limits)


def limits_of_state(limits: Mapping[str, int]) -> AdmissionConfig | None:
    """The limits a local stack's state recorded; None for a state written before it recorded them."""
    try:
        tenant = TenantLimits(limits["tenant_max_running_jobs"], limits["tenant_max_segments"])
        return AdmissionConfig("", "", stack_limits=tenant, max_running_jobs=limits["max_running_jobs"])
    except KeyError:
        return None


def stack_admission(conn: Connection, resources: StackResources, env: Mapping[str, str]) -> AdmissionConfig | None:
    """The stack's admission config (its limits, its bucket and state machine), or None where not known."""
    if conn.aws.endpoint_url:
        # A LocalStack deployment's parameters are the template's defaults, which `local up` overrides in its
        # processes' environments: only its state says what they admit with.
        local = local_stack(conn.aws.endpoint_url, env)
        found = limits_of_state(local.limits) if local is not None and local.stack == conn.stack_name else None
    else:
        try:
            described = conn.aws.client("cloudformation").describe_stacks(StackName=conn.stack_name)["Stacks"]
        except (BotoCoreError, ClientError):
            return None
        found = limits_of_parameters(
            {item["ParameterKey"]: item.get("ParameterValue", "") for item in described[0].get("Parameters", [])}
        )
    if found is None:
        return None
    return AdmissionConfig(
        resources.work_bucket, resources.state_machine_arn, stack_limits=found.stack_limits,
        max_running_jobs=found.max_running_jobs,
    )  # fmt: skip


def operations(conn: Connection, env: Mapping[str, str]) -> Operations:
    """Cancel and retry on the stack `conn` names, a retried tenant job admitted with the stack's limits."""
    resources = conn.resources()
    storage = S3Storage(conn.aws.client("s3"))
    outbox = None
    if resources.webhook_queue_url:
        # An admitted job's `started` event, as the stack's own admitters send it.
        sqs = SqsOrderedQueue(conn.aws.client("sqs"))
        outbox = WebhookOutbox(sqs, resources.webhook_queue_url, storage, resources.work_bucket)
    return Operations(
        storage, StepFunctions(conn.aws.client("stepfunctions")), SnsNotifier(conn.aws.client("sns")), resources,
        admission=stack_admission(conn, resources, env), outbox=outbox,
    )  # fmt: skip

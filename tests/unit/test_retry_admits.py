"""Every retry path admits a tenant's job at once with the stack's limits (issue 43's leftover): the tenant
API (functions/api, its limits from its environment), the operator's dashboard and the CLI (their limits
from the local stack's state, or a deployed stack's parameters: fleetctl.admission). A tenant below its
limit runs its retried job right after the call; a tenant at its limit still waits for a slot.

The farm is the simulation's (tests/simulation/farm.py): the real slicer, admitter, retry and readers on
in-memory S3 and Step Functions, every party run to its end here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from fleetctl import admission as cli_admission
from fleetctl.connection import Connection
from fleetctl.dashboard.source import StackSource
from fleetctl.local.state import LocalState
from fleetctl.stack import StackResources
from functions.api import app as api_app
from fusionfleet.adapters.aws import AwsTarget
from fusionfleet.environment import settings
from fusionfleet.environment.api import ApiEnvironment
from fusionfleet.environment.contract import from_env
from fusionfleet.fleet.tenants import TenantLimits
from fusionfleet.jobs.reader import JobReader
from fusionfleet.jobs.runs import execution_name
from fusionfleet.jobs.states import JobState
from fusionfleet.jobs.waiting import read_waiting
from fusionfleet.services.admission import AdmissionConfig
from fusionfleet.services.job_retry import NEXT_ADMISSION
from fusionfleet.services.operations import Operations
from fusionfleet.services.tenant_jobs import TenantJobs
from tests.simulation.alone import end, run, submit
from tests.simulation.farm import MACHINE, TENANT, Farm
from tests.support.jobs import MEDIA, WORK

STACK = "fusionfleet"


def operations(farm: Farm, admission: AdmissionConfig | None) -> Operations:
    return Operations(
        farm.storage, farm.orchestrator, farm.notifier, farm.resources, clock=farm.clock, admission=admission
    )


def limits(tenant_jobs: int) -> AdmissionConfig:
    return AdmissionConfig(WORK, MACHINE, stack_limits=TenantLimits(tenant_jobs))


def failed_alone(farm: Farm) -> str:
    """A tenant's only job, failed: its slot is free."""
    job = submit(farm).job_id
    end(farm, job, "FAILED")
    return job


def failed_beside_a_running_one(farm: Farm) -> tuple[str, str]:
    """A tenant that may run one job: its first failed, its second was admitted in its place and runs."""
    first, second = submit(farm).job_id, submit(farm).job_id
    end(farm, first, "FAILED")
    assert [item.job_id for item in farm.admitter().admit(TENANT)] == [second]
    return first, second


def assert_running_at_once(farm: Farm, job: str, told: object) -> None:
    assert f"(execution {execution_name(job, 1)})" in str(told), told
    assert farm.orchestrator.running(TENANT) == [execution_name(job, 1)]
    assert farm.job_status(job).state is JobState.RUNNING
    assert read_waiting(farm.storage, WORK, job) is None


def assert_waits_for_its_slot(farm: Farm, job: str, told: object) -> None:
    """At its limit: WAITING for the admitter's reason (its tenant is full), not the minute's NEXT_ADMISSION."""
    assert "waits for its tenant acme's turn" in str(told), told
    view = farm.job_status(job)
    assert view.state is JobState.WAITING
    waiting = read_waiting(farm.storage, WORK, job)
    assert waiting is not None and waiting.reason != NEXT_ADMISSION
    assert "running 1 of the 1 jobs" in waiting.reason, waiting.reason


def retried_alone(retrier: Callable[[Farm], Operations | StackSource]) -> None:
    """A tenant's only job, failed and retried through `retrier`'s retry: it runs at once."""
    farm = Farm(tenant_limit=1)
    job = failed_alone(farm)
    assert_running_at_once(farm, job, run(farm, partial(retrier(farm).retry, job)))


def retried_at_the_limit(retrier: Callable[[Farm], Operations | StackSource]) -> tuple[Farm, str, str]:
    """A tenant's failed job retried through `retrier`'s retry while its other job holds its one slot: it waits.
    The farm, the retried job and the running one."""
    farm = Farm(tenant_limit=1)
    first, second = failed_beside_a_running_one(farm)
    assert_waits_for_its_slot(farm, first, run(farm, partial(retrier(farm).retry, first)))
    assert farm.orchestrator.running(TENANT) == [second]
    return farm, first, second


def dashboard(farm: Farm, admission: AdmissionConfig) -> StackSource:
    reader = JobReader(farm.storage, farm.orchestrator, WORK, MACHINE, clock=farm.clock)
    return StackSource(reader, operations(farm, admission))


# ---------------------------------------------------------------- Operations (the one retry all three use),
# and the operator's dashboard
@pytest.mark.parametrize("entry", [operations, dashboard], ids=["operations", "dashboard"])
def test_a_retry_with_the_stacks_limits_runs_a_job_of_a_tenant_below_its_limit_at_once(
    entry: Callable[[Farm, AdmissionConfig], Operations | StackSource],
) -> None:
    retried_alone(lambda farm: entry(farm, limits(1)))


@pytest.mark.parametrize("entry", [operations, dashboard], ids=["operations", "dashboard"])
def test_a_retry_with_the_stacks_limits_leaves_a_tenant_at_its_limit_waiting_for_its_slot(
    entry: Callable[[Farm, AdmissionConfig], Operations | StackSource],
) -> None:
    farm, first, second = retried_at_the_limit(lambda farm: entry(farm, limits(1)))
    # AND once the slot frees, the next admission starts it
    end(farm, second)
    assert [item.job_id for item in farm.admitter().admit(TENANT)] == [first]


def test_without_the_stacks_limits_a_retry_still_waits_for_the_next_admission() -> None:
    # The fallback where a caller cannot learn the limits (fleetctl.admission says when): the old minute's wait.
    farm = Farm(tenant_limit=1)
    job = failed_alone(farm)
    told = run(farm, partial(operations(farm, None).retry, job))
    assert "waits for its tenant" in str(told)
    waiting = read_waiting(farm.storage, WORK, job)
    assert waiting is not None and waiting.reason == NEXT_ADMISSION
    assert farm.orchestrator.running(TENANT) == []


# ---------------------------------------------------------------- the tenant API
def api_environment(tenant_jobs: int) -> ApiEnvironment:
    env: dict[str, str] = {
        settings.AWS_REGION: "us-east-1", settings.MEDIA_BUCKET: MEDIA, settings.WORK_BUCKET: WORK,
        settings.STATE_MACHINE_ARN: MACHINE, settings.NOTIFICATION_TOPIC_ARN: "topic",
        settings.TENANT_MAX_RUNNING_JOBS: str(tenant_jobs), settings.TENANT_MAX_SEGMENTS: "0",
        settings.WEBHOOK_QUEUE_URL: "https://sqs.us-east-1.amazonaws.com/123456789012/webhooks.fifo",
    }  # fmt: skip
    return from_env(ApiEnvironment, env)


def test_the_api_lambda_admits_with_the_limits_of_its_environment() -> None:
    config = api_environment(3)
    assert api_app.admission(config) == AdmissionConfig(WORK, MACHINE, stack_limits=TenantLimits(3, 0))
    built = api_app.tenant_jobs(config).operations
    assert built.admission == api_app.admission(config) and built.outbox is not None


def api_retry(farm: Farm, tenant_jobs: int) -> tuple[str, Callable[[], Any]]:
    """A job the tenant made through the API, failed; its `POST /jobs/{id}/retry` as the Lambda wires it."""
    created: list[str] = []
    run(farm, farm.api_submit(False, created))
    run(farm, partial(farm.slice, f"tenants/{TENANT}/jobs/{created[0]}.json"))
    pipeline = farm.orchestrator.running(TENANT)[-1]
    end(farm, pipeline, "FAILED")
    config = api_environment(tenant_jobs)
    ops = operations(farm, api_app.admission(config))
    reader = JobReader(farm.storage, farm.orchestrator, WORK, MACHINE, clock=farm.clock)
    api = TenantJobs(farm.storage, reader, ops, MEDIA, WORK, clock=farm.clock, default_engine="copy")
    return pipeline, partial(api.retry, TENANT, created[0])


def test_a_tenants_job_retried_through_the_api_runs_right_after_the_call() -> None:
    farm = Farm(tenant_limit=1)
    pipeline, retry = api_retry(farm, 1)
    run(farm, retry)
    assert farm.orchestrator.running(TENANT) == [execution_name(pipeline, 1)]
    assert farm.job_status(pipeline).state is JobState.RUNNING


def test_a_tenants_job_retried_through_the_api_at_its_limit_waits() -> None:
    farm = Farm(tenant_limit=1)
    pipeline, retry = api_retry(farm, 1)
    other = submit(farm).job_id  # takes the freed slot first
    assert farm.orchestrator.running(TENANT) == [other]
    told = run(farm, retry)
    assert_waits_for_its_slot(farm, pipeline, told)


# ---------------------------------------------------------------- the CLI (and the dashboard's process)
OUTPUTS = {
    "Stage": "local", "MediaBucketName": MEDIA, "WorkBucketName": WORK, "IngestQueueUrl": "q",
    "IngestDeadLetterQueueUrl": "q", "RenderQueueHighUrl": "q", "RenderQueueNormalUrl": "q",
    "RenderQueueLowUrl": "q", "RenderDeadLetterQueueUrl": "q", "MergeQueueUrl": "q",
    "MergeDeadLetterQueueUrl": "q", "NotificationTopicArn": "topic", "StateMachineArn": MACHINE,
}  # fmt: skip


def deployed(parameters: dict[str, str]) -> Connection:
    """A stack with FusionFleet's outputs and these parameters (moto's CloudFormation); its connection."""
    template = {
        "Parameters": {name: {"Type": "String"} for name in parameters},
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {name: {"Value": value} for name, value in OUTPUTS.items()},
    }
    boto3.client("cloudformation", region_name="us-east-1").create_stack(
        StackName=STACK, TemplateBody=json.dumps(template),
        Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items()],
    )  # fmt: skip
    return Connection(AwsTarget(region="us-east-1"), STACK)


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


def test_on_aws_the_cli_learns_the_limits_from_the_stacks_parameters(aws: None) -> None:
    conn = deployed({"Stage": "prod", "TenantMaxRunningJobs": "1", "TenantMaxSegments": "0"})
    found = cli_admission.stack_admission(conn, conn.resources(), {})
    assert found == AdmissionConfig(WORK, MACHINE, stack_limits=TenantLimits(1, 0))
    built = cli_admission.operations(conn, {})
    assert built.admission == found and built.outbox is None  # a stack without a webhook queue sends no event
    # AND its retry runs a tenant's job below its limit at once, and leaves one at its limit waiting
    retried_alone(lambda farm: operations(farm, found))
    retried_at_the_limit(lambda farm: operations(farm, found))


def test_a_stack_without_the_limit_parameters_leaves_the_cli_to_the_next_admission(aws: None) -> None:
    conn = deployed({"Stage": "prod"})
    assert cli_admission.stack_admission(conn, conn.resources(), {}) is None


def local_stack(tmp_path: Path, limits: dict[str, int]) -> tuple[Connection, dict[str, str]]:
    LocalState(port=4566, region="us-east-1", stack=STACK, outputs=OUTPUTS, limits=limits).save(tmp_path / "state.json")
    env: dict[str, str] = {settings.FUSIONFLEET_LOCAL_DIR: str(tmp_path)}
    return Connection(AwsTarget(region="us-east-1", endpoint_url="http://127.0.0.1:4566"), STACK), env


def test_on_the_local_stack_the_cli_takes_the_limits_local_up_gave_its_admitters(tmp_path: Path) -> None:
    conn, env = local_stack(tmp_path, {"max_running_jobs": 150, "tenant_max_running_jobs": 1, "tenant_max_segments": 4})
    resources = StackResources.from_outputs(OUTPUTS)
    found = cli_admission.stack_admission(conn, resources, env)
    assert found == AdmissionConfig(WORK, MACHINE, stack_limits=TenantLimits(1, 4), max_running_jobs=150)
    retried_alone(lambda farm: operations(farm, found))
    # AND a state written before it recorded them gives none (not the template's defaults, which local up overrides)
    conn, env = local_stack(tmp_path, {})
    assert cli_admission.stack_admission(conn, resources, env) is None
    # AND so does a LocalStack endpoint no state of this machine names
    elsewhere = Connection(AwsTarget(region="us-east-1", endpoint_url="http://127.0.0.1:4999"), STACK)
    assert cli_admission.stack_admission(elsewhere, resources, env) is None


def test_the_template_passes_the_parameters_the_cli_reads_to_the_functions_that_admit() -> None:
    template = (Path(__file__).resolve().parents[2] / "template.yaml").read_text()
    for variable, parameter in (
        (settings.TENANT_MAX_RUNNING_JOBS, cli_admission.TENANT_JOBS_PARAMETER),
        (settings.TENANT_MAX_SEGMENTS, cli_admission.TENANT_SEGMENTS_PARAMETER),
    ):
        # the slicer, the watchdog, the job events and the API
        assert template.count(f"{variable}: !Ref {parameter}") == 4, variable

"""Each component's environment contract reads back what it writes, names what is wrong, and is the
only list of variables template.yaml may set for that component (nothing set that nobody reads)."""

from __future__ import annotations

from dataclasses import MISSING, dataclass
from pathlib import Path
from typing import Any

import pytest

from fleetctl.local.processes import UpOptions, process_environments
from fleetctl.local.tokens import TENANT_CLAIM
from fleetctl.stack import StackResources
from fusionfleet.environment.api import ApiEnvironment
from fusionfleet.environment.contract import (
    EnvironmentInvalid,
    from_env,
    names,
    to_env,
    variable,
)
from fusionfleet.environment.dead_letters import DeadLetterEnvironment
from fusionfleet.environment.facefusion import READ_AS_IS, FaceFusionEnvironment
from fusionfleet.environment.job_events import JobEventsEnvironment
from fusionfleet.environment.settings import POWERTOOLS, POWERTOOLS_SERVICE_NAME
from fusionfleet.environment.slicer import SlicerEnvironment
from fusionfleet.environment.watchdog import WatchdogEnvironment
from fusionfleet.environment.worker import WorkerEnvironment
from tests.support.template import load_template

# The Lambda runtime sets AWS_REGION in every function; ECS does not (the task definition does).
LAMBDA_RUNTIME = frozenset({"AWS_REGION"})
HANDLERS: dict[str, type[Any]] = {
    "functions.slicer.app.handler": SlicerEnvironment,
    "functions.dlq.app.handler": DeadLetterEnvironment,
    "functions.watchdog.app.handler": WatchdogEnvironment,
    "functions.api.app.handler": ApiEnvironment,
    "functions.job_events.app.handler": JobEventsEnvironment,
}
CONTRACTS = (WorkerEnvironment, *HANDLERS.values())
# What the worker's engines read from the environment it hands down (FaceFusion's settings).
ENGINE_VARIABLES = names(FaceFusionEnvironment) | READ_AS_IS
REQUIRED = {
    "region": "r", "work_bucket": "w", "state_machine_arn": "arn:m", "topic_arn": "arn:t", "media_bucket": "m",
    "webhook_queue_url": "q/w.fifo", "secret_prefix": "fusionfleet/s/webhooks",
}  # fmt: skip

EXAMPLES: list[Any] = [
    WorkerEnvironment(
        role="merge", queue_urls=("q/a", "q/b"), name="w1", scratch=Path("/s"), region="eu-west-1",
        endpoint_url="http://e", visibility_s=30, engine_max_gpu_mb=4096, faults_file=Path("/f.json"),
        gpu_hourly_price=0.5, beat_s=2.5, min_free_gpu_mb=1024.0, visible_gpus=("0", "1"), lookahead_min_backlog=3,
    ),
    SlicerEnvironment(
        region="r", work_bucket="w", state_machine_arn="arn:m", topic_arn="arn:t", endpoint_url="http://e",
        default_engine="copy", visibility_s=45, accepted_backlog_s=7200, gpu_instance_types=("g5.xlarge", "g6.xlarge"),
        fleet_max_workers=8,
    ),
    WatchdogEnvironment(
        region="r", work_bucket="w", state_machine_arn="arn:m", topic_arn="arn:t", stall_s=900,
        render_queue_urls=("q/h", "q/n", "q/l"), backups=False, backup_factor=3.5, backup_last_segments=2,
    ),
    ApiEnvironment(
        region="r", media_bucket="m", work_bucket="w", state_machine_arn="arn:m", topic_arn="arn:t",
        tenant_claim="custom:tenant", upload_url_s=60,
    ),
    DeadLetterEnvironment(region="r", endpoint_url="http://e"),
]  # fmt: skip


@pytest.mark.parametrize("value", EXAMPLES, ids=lambda value: type(value).__name__)
def test_a_contract_reads_back_what_it_writes(value: Any) -> None:
    assert from_env(type(value), to_env(value)) == value


@pytest.mark.parametrize("contract", CONTRACTS, ids=lambda contract: contract.__name__)
def test_unset_and_empty_variables_take_the_fields_defaults(contract: type[Any]) -> None:
    fields = contract.__dataclass_fields__
    given = {
        name: value
        for name, value in REQUIRED.items()
        if name in fields and fields[name].default is MISSING and fields[name].default_factory is MISSING
    }
    required = to_env(contract(**given))
    optional = {name: "" for name in names(contract) if name not in _required(contract)}
    required = {name: value for name, value in required.items() if name in _required(contract)}
    assert from_env(contract, required) == from_env(contract, {**optional, **required}) == contract(**given)


def test_a_missing_or_unreadable_variable_is_named() -> None:
    @dataclass(frozen=True)
    class Example:
        bucket: str = variable("EXAMPLE_BUCKET")
        count: int = variable("EXAMPLE_COUNT", 2)
        rate: float = variable("EXAMPLE_RATE", 0.5)

    with pytest.raises(EnvironmentInvalid, match="EXAMPLE_BUCKET is not set"):
        from_env(Example, {"EXAMPLE_COUNT": "3"})
    with pytest.raises(EnvironmentInvalid, match="EXAMPLE_COUNT is not a whole number: 'many'"):
        from_env(Example, {"EXAMPLE_BUCKET": "b", "EXAMPLE_COUNT": "many"})
    with pytest.raises(EnvironmentInvalid, match="EXAMPLE_RATE is not a number"):
        from_env(Example, {"EXAMPLE_BUCKET": "b", "EXAMPLE_RATE": "fast"})
    assert names(Example) == {"EXAMPLE_BUCKET", "EXAMPLE_COUNT", "EXAMPLE_RATE"}


def _resources(kind: str) -> dict[str, dict[str, Any]]:
    resources = load_template()["Resources"]
    return {name: spec["Properties"] for name, spec in resources.items() if spec["Type"] == kind}


def _required(contract: type[Any]) -> set[str]:
    fields = contract.__dataclass_fields__.values()
    return {field.metadata["env"] for field in fields if "env" in field.metadata and field.default is MISSING}


def test_every_function_in_the_template_sets_only_variables_its_contract_reads() -> None:
    functions = _resources("AWS::Serverless::Function")
    assert {properties["Handler"] for properties in functions.values()} == set(HANDLERS)
    for name, properties in functions.items():
        contract = HANDLERS[properties["Handler"]]
        set_here = set(properties.get("Environment", {}).get("Variables", {}))
        unread = set_here - names(contract) - POWERTOOLS
        assert not unread, f"{name} sets {sorted(unread)}, which {contract.__name__} does not read"
        missing = _required(contract) - LAMBDA_RUNTIME - set_here
        assert not missing, f"{name} does not set {sorted(missing)}, which {contract.__name__} needs"


def test_every_worker_container_sets_only_variables_the_worker_reads() -> None:
    containers = [
        container
        for properties in _resources("AWS::ECS::TaskDefinition").values()
        for container in properties["ContainerDefinitions"]
    ]
    assert len(containers) >= 2  # render and merge
    for container in containers:
        set_here = {item["Name"] for item in container.get("Environment", [])}
        unread = set_here - names(WorkerEnvironment) - ENGINE_VARIABLES
        assert not unread, f"container {container['Name']} sets {sorted(unread)}, which no worker reads"
        assert {"FUSIONFLEET_QUEUE_URLS", "AWS_REGION"} <= set_here, container["Name"]


def test_local_up_gives_each_process_what_its_contract_reads_back_as_the_options() -> None:
    # GIVEN options that differ from every default `local up` passes on
    resources = StackResources(
        stage="local", media_bucket="media", work_bucket="work", ingest_queue_url="q/ingest",
        ingest_dlq_url="q/ingest-dlq", render_queue_urls=("q/high", "q/normal", "q/low"), render_dlq_url="q/rdlq",
        merge_queue_url="q/merge", merge_dlq_url="q/mdlq", topic_arn="arn:t", state_machine_arn="arn:m",
    )  # fmt: skip
    options = UpOptions(
        default_engine="copy", visibility_s=45, accepted_backlog_s=600, max_workers=6, watchdog_stall_s=99,
        backups=False, backup_factor=4.0, faults_file=Path("/tmp/faults.json"),
    )  # fmt: skip
    # WHEN the process table's environments are built, and each process reads its own
    envs = process_environments(options, resources, Path("/scratch"))
    where = {"AWS_REGION": "us-east-1"}
    slicer = from_env(SlicerEnvironment, {**where, **envs.slicer})
    watchdog = from_env(WatchdogEnvironment, {**where, **envs.watchdog})
    render = from_env(WorkerEnvironment, envs.render)
    merge = from_env(WorkerEnvironment, envs.merge)
    api = from_env(ApiEnvironment, {**where, **envs.api})
    # THEN each reads what `local up` was asked for
    assert (slicer.default_engine, slicer.visibility_s, slicer.accepted_backlog_s) == ("copy", 45, 600)
    assert (slicer.work_bucket, slicer.fleet_max_workers) == ("work", 6)
    assert (watchdog.stall_s, watchdog.backups, watchdog.backup_factor) == (99, False, 4.0)
    assert watchdog.render_queue_urls == resources.render_queue_urls
    assert (render.queue_urls, render.visibility_s, render.preload_engine) == (
        ("q/high", "q/normal", "q/low"),
        45,
        "copy",
    )
    assert (render.scratch, render.work_bucket, render.faults_file) == (
        Path("/scratch"),
        "work",
        Path("/tmp/faults.json"),
    )
    assert (merge.queue_urls, merge.preload_engine, merge.visibility_s) == (
        ("q/merge",),
        None,
        WorkerEnvironment.visibility_s,
    )
    assert (api.media_bucket, api.tenant_claim) == ("media", TENANT_CLAIM)
    # AND nothing else: the rest each process inherits, as a shell-set variable always was
    # (and the role the IAM judge holds the process's calls to, when recording is on: fleetctl/local/recording.py)
    assert set(envs.render) == {
        "FUSIONFLEET_QUEUE_URLS", "FUSIONFLEET_PRELOAD_ENGINE", "FUSIONFLEET_VISIBILITY_SECONDS",
        "FUSIONFLEET_SCRATCH", "WORK_BUCKET", "FUSIONFLEET_FAULTS_FILE", "FUSIONFLEET_IAM_ROLE",
    }  # fmt: skip
    roles = {name: env["FUSIONFLEET_IAM_ROLE"] for name, env in vars(envs).items()}
    assert roles == {"slicer": "SlicerFunctionRole", "watchdog": "WatchdogFunctionRole",
                     "dead_letters": "DeadLetterFunctionRole", "merge": "MergeTaskRole", "render": "RenderTaskRole",
                     "api": "ApiFunctionRole", "job_events": "JobEventsFunctionRole"}  # fmt: skip
    for variables in (envs.slicer, envs.watchdog, envs.api, envs.dead_letters):
        assert POWERTOOLS_SERVICE_NAME in variables


def test_one_bucket_has_one_variable_in_every_contract() -> None:
    # The work bucket is WORK_BUCKET wherever it is read (the workers' was once a second name).
    for contract in (WorkerEnvironment, SlicerEnvironment, WatchdogEnvironment, ApiEnvironment):
        fields = {field.name: field.metadata["env"] for field in contract.__dataclass_fields__.values()
                  if "env" in field.metadata}  # fmt: skip
        assert fields["work_bucket"] == "WORK_BUCKET", contract.__name__
    assert fields["media_bucket"] == "MEDIA_BUCKET"


def test_the_templates_defaults_are_the_contracts() -> None:
    # A default is written once, in its contract: the template's parameters that feed it say the same.
    parameters = load_template()["Parameters"]
    assert parameters["ApiTenantClaim"]["Default"] == ApiEnvironment.tenant_claim == TENANT_CLAIM
    assert int(parameters["MaxUploadMiB"]["Default"]) == ApiEnvironment.max_upload_mib

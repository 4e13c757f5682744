"""template.yaml and the state machine definition: lint, SAM transform, stage conditions, wiring.

CloudFormation, not SAM, resolves conditions, so the SAM transform is checked for what it leaves
for CloudFormation to decide: which resources exist when Stage=local (only what LocalStack runs)
and which exist on AWS. Conditions are evaluated here by a small evaluator of their functions.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest
from cfnlint.api import ManualArgs, lint, lint_file

from fleetctl.stack import StackResources
from fusionfleet.fleet.autoscale import AWS_COOLDOWNS
from fusionfleet.jobs.final_notice import NOTICE_NOT_CLAIMED_ERROR, NOTIFIED_INPUT_FAILURE_ERROR
from gpu_worker.lifecycle.liveness import LivenessPolicy
from tests.support.cfn import (
    _SUB_NAME,
    ASL,
    PSEUDO_PARAMETERS,
    ROOT,
    STAGES,
    TEMPLATE,
    Conditions,
    Template,
    _transform,
    allows,
    existing,
    find_in_map,
    parameter_values,
    properties,
    references,
    source,
    statements,
    transform,
)

SLICER_APP = ROOT / "functions" / "slicer" / "app.py"
SLICER_MAKEFILE = ROOT / "functions" / "Makefile"
# Resource types LocalStack cannot run here: they must not exist when Stage=local.
AWS_ONLY_PREFIXES = (
    "AWS::Lambda::",
    "AWS::ECS::",
    "AWS::AutoScaling::",
    "AWS::ApplicationAutoScaling::",
    "AWS::EC2::",
    "AWS::CloudWatch::",
    "AWS::Logs::",
)
# What the local stack is made of: these must exist, unconditionally, for every stage.
LOCAL_TYPES = (
    "AWS::S3::Bucket",
    "AWS::SQS::Queue",
    "AWS::SQS::QueuePolicy",
    "AWS::SNS::Topic",
    "AWS::StepFunctions::StateMachine",
)
# Resources of LOCAL_TYPES that exist on AWS only: the tenant page's bucket (CloudFront serves it; the
# local stack serves the page from its dashboard process).
AWS_ONLY_OF_LOCAL_TYPES = {"DashboardBucket": "IsAws"}
# Partitions other than aws, by a region of each: GovCloud and China lack resource types the aws one has.
OTHER_PARTITIONS = ["us-gov-west-1", "cn-north-1"]


def test_template_passes_cfn_lint_without_errors_or_warnings() -> None:
    # GIVEN the template as committed
    # WHEN cfn-lint (the same rules as `cfn-lint template.yaml`) checks it
    matches = lint_file(TEMPLATE)
    # THEN it reports no error and no warning
    problems = [
        f"{m.rule.id} line {m.linenumber}: {m.message}" for m in matches if m.rule.severity in ("error", "warning")
    ]
    assert problems == []


def test_template_passes_cfn_lint_in_govcloud_and_china() -> None:
    # GIVEN the template as committed, deployed in GovCloud or China (no CloudFront origin access control
    # nor response-headers policy there, no distribution in GovCloud)
    # WHEN cfn-lint checks it for those regions (E3006: a resource type the region does not have)
    matches = lint_file(TEMPLATE, config=ManualArgs(regions=OTHER_PARTITIONS))
    # THEN it reports no error and no warning: what those partitions lack exists only where they are not
    problems = [
        f"{m.rule.id} line {m.linenumber}: {m.message}" for m in matches if m.rule.severity in ("error", "warning")
    ]
    assert problems == []


# W1028 inside the OpenAPI body SAM writes for an HttpApi whose routes' function has the API's own
# condition: SAM wraps each route in `Fn::If` on that condition, whose false branch cannot be reached in a
# resource that exists only when it is true. Generated, harmless, and not ours to change.
SAM_GENERATED_BRANCH = "W1028 Resources/HttpApi/Properties/Body/"


@cache
def _transformed_lint(stage: str, regions: tuple[str, ...] = (PSEUDO_PARAMETERS["AWS::Region"],)) -> tuple[str, ...]:
    matches = lint(json.dumps(_transform(stage)), config=ManualArgs(regions=list(regions)))
    found = (
        f"{m.rule.id} {'/'.join(map(str, m.path or []))}: {m.message}"
        for m in matches
        if m.rule.severity in ("error", "warning")
    )
    return tuple(problem for problem in found if not problem.startswith(SAM_GENERATED_BRANCH))


@pytest.mark.parametrize("stage", STAGES)
def test_sam_transformed_template_passes_cfn_lint(stage: str) -> None:
    # GIVEN the template as CloudFormation receives it after the SAM transform for this Stage
    # WHEN cfn-lint checks it (rules such as E3505, an SQS event source whose queue hides a message
    # for less than the function's timeout, only see the generated Lambda resources)
    problems = _transformed_lint(stage)
    # THEN it reports no error and no warning
    assert problems == ()


def test_sam_transformed_aws_template_passes_cfn_lint_in_govcloud_and_china() -> None:
    # GIVEN the AWS stage's transformed template, WHEN cfn-lint checks it for GovCloud and China
    problems = _transformed_lint("prod", tuple(OTHER_PARTITIONS))
    # THEN it reports no error and no warning there either
    assert problems == ()


def test_transformed_lint_catches_a_dead_letter_queue_shorter_than_its_consumer() -> None:
    # GIVEN the AWS template with the render dead-letter queue back at SQS's 30 s default
    template = transform("prod")
    template["Resources"]["RenderDeadLetterQueue"]["Properties"]["VisibilityTimeout"] = 30
    # WHEN cfn-lint checks the transformed template
    matches = lint(json.dumps(template), config=ManualArgs(regions=[PSEUDO_PARAMETERS["AWS::Region"]]))
    # THEN it names the event source Lambda would refuse (the deploy blocker the raw lint missed)
    assert "E3505" in {m.rule.id for m in matches}


# ---------------------------------------------------------------- (b) SAM transform and stages


@pytest.mark.parametrize("stage", STAGES)
def test_transform_leaves_the_stage_decision_to_cloudformation(stage: str) -> None:
    # GIVEN the template transformed by SAM with this Stage
    template = transform(stage)
    # WHEN its resources are listed with their conditions
    listed = {name: (resource["Type"], resource.get("Condition")) for name, resource in template["Resources"].items()}
    # THEN SAM produced the same resources with the same conditions as for the other stage
    other = transform(next(s for s in STAGES if s != stage))
    assert listed == {name: (r["Type"], r.get("Condition")) for name, r in other["Resources"].items()}
    # AND every kind of resource the stack needs is there
    types = {resource_type for resource_type, _ in listed.values()}
    expected = {
        *LOCAL_TYPES,
        "AWS::Lambda::Function",
        "AWS::Lambda::EventSourceMapping",
        "AWS::ECS::Cluster",
        "AWS::ECS::CapacityProvider",
        "AWS::ECS::ClusterCapacityProviderAssociations",
        "AWS::ECS::TaskDefinition",
        "AWS::ECS::Service",
        "AWS::AutoScaling::AutoScalingGroup",
        "AWS::EC2::LaunchTemplate",
        "AWS::EC2::SecurityGroup",
        "AWS::ApplicationAutoScaling::ScalableTarget",
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        "AWS::CloudWatch::Alarm",
        "AWS::IAM::Role",
    }
    assert expected <= types


AWS_OPTIONS_ON = {"CreateVpcEndpoints": "true", "GpuWarmPoolSize": 1, "OutputRetentionDays": 30}


def test_aws_only_resources_exist_on_aws_and_not_for_local() -> None:
    # GIVEN the transformed template and its conditions evaluated for Stage=local and Stage=prod
    template = transform("local")
    local = Conditions(template, parameter_values(template, "local"))
    # (with every AWS option on: the VPC endpoints and the warm pool exist only when asked for)
    aws = Conditions(template, {**parameter_values(template, "prod"), **AWS_OPTIONS_ON})
    aws_only = {n: r for n, r in template["Resources"].items() if r["Type"].startswith(AWS_ONLY_PREFIXES)}
    assert aws_only
    # WHEN each AWS-only resource's condition is evaluated
    # THEN it is false for local and true for prod
    wrong_for_local = [n for n, r in aws_only.items() if local.holds(r.get("Condition"))]
    missing_on_aws = [n for n, r in aws_only.items() if not aws.holds(r.get("Condition"))]
    assert wrong_for_local == []
    assert missing_on_aws == []


def test_local_resources_carry_no_condition() -> None:
    # GIVEN the transformed template
    template = transform("local")
    # WHEN the buckets, queues, topic and state machine are picked out
    local_resources = {n: r for n, r in template["Resources"].items() if r["Type"] in LOCAL_TYPES}
    # THEN there are some of each, and none of them has a condition
    assert {r["Type"] for r in local_resources.values()} == set(LOCAL_TYPES)
    assert {n: r["Condition"] for n, r in local_resources.items() if "Condition" in r} == AWS_ONLY_OF_LOCAL_TYPES


def test_iam_resources_exist_exactly_when_something_that_exists_uses_them() -> None:
    # GIVEN the transformed template for each stage
    for stage in STAGES:
        template = transform(stage)
        conditions = Conditions(template, parameter_values(template, stage))
        present = existing(template, conditions)
        used = {ref for resource in present.values() for ref in references(resource, conditions)}
        # (a policy for people, the operators', is used by those it is attached to: the stack names it)
        outputs = [o for o in template.get("Outputs", {}).values() if conditions.holds(o.get("Condition"))]
        used |= {ref for output in outputs for ref in references(output["Value"], conditions)}
        # WHEN the IAM roles and instance profiles are checked
        iam = {n: r for n, r in template["Resources"].items() if r["Type"].startswith("AWS::IAM::")}
        # THEN each exists for this stage if and only if an existing resource refers to it
        mismatched = {n: (n in present, n in used) for n in iam if (n in present) != (n in used)}
        assert mismatched == {}, stage


@pytest.mark.parametrize("stage", STAGES)
def test_nothing_that_exists_refers_to_something_that_does_not(stage: str) -> None:
    # GIVEN the transformed template and the resources and outputs that exist for this stage
    template = transform(stage)
    conditions = Conditions(template, parameter_values(template, stage))
    present = existing(template, conditions)
    known = (
        set(present)
        | set(template.get("Parameters", {}))
        | set(PSEUDO_PARAMETERS)
        | {"AWS::NoValue", "AWS::StackName", "AWS::StackId", "AWS::URLSuffix"}
    )
    outputs = {n: o for n, o in template.get("Outputs", {}).items() if conditions.holds(o.get("Condition"))}
    # WHEN their references (Ref, GetAtt, Sub, DependsOn) are collected
    dangling: dict[str, set[str]] = {}
    for name, node in {**present, **{f"Outputs.{n}": o for n, o in outputs.items()}}.items():
        refs = set(references(node.get("Properties", node.get("Value")), conditions))
        depends = node.get("DependsOn", [])
        refs |= set([depends] if isinstance(depends, str) else depends)
        if refs - known:
            dangling[name] = refs - known
    # THEN every reference points at something that exists too
    assert dangling == {}


def test_local_outputs_are_what_the_client_reads() -> None:
    # GIVEN the outputs that exist when Stage=local
    template = transform("local")
    conditions = Conditions(template, parameter_values(template, "local"))
    outputs = {n: "value" for n, o in template["Outputs"].items() if conditions.holds(o.get("Condition"))}
    # WHEN the client builds its view of the stack from them
    resources = StackResources.from_outputs(outputs)
    # THEN it finds everything it needs, and no AWS-only output is among them
    assert resources.stage == "value"
    aws_only_outputs = {"SlicerFunctionArn", "ClusterName", "RenderServiceName", "MergeServiceName"}
    assert aws_only_outputs <= set(template["Outputs"])
    assert aws_only_outputs.isdisjoint(outputs)


def test_aws_only_parameters_need_no_value_for_a_local_deploy() -> None:
    # GIVEN the template's parameters
    parameters = source()["Parameters"]
    # WHEN a local deploy passes only Stage
    without_default = [name for name, spec in parameters.items() if name != "Stage" and "Default" not in spec]
    resolved_by_cloudformation = [name for name, spec in parameters.items() if spec["Type"].startswith("AWS::")]
    # THEN every other parameter has a default, and none has a type CloudFormation would look up
    # (an SSM-typed parameter is resolved for every stage, and the local stack runs no SSM)
    assert without_default == []
    assert resolved_by_cloudformation == []
    # AND an AWS stage must supply the network, the image and the API's token issuer (the Rules section says so)
    assertions = json.dumps(source()["Rules"])
    for required in ("VpcId", "SubnetIds", "WorkerImage", "ApiJwtIssuer", "ApiJwtAudience"):
        assert f'"Ref": "{required}"' in assertions


# ---------------------------------------------------------------- (c) the state machine definition


def _asl_text() -> str:
    return ASL.read_text()


# Service integrations name their partition through the substitution: China and GovCloud are not arn:aws.
INTEGRATION = "arn:${Partition}:states:::"
DYNAMIC_TARGETS = {"s3": {"WorkBucket"}, "ecs": {"MergeService"}}


def test_the_state_machine_names_no_partition_of_its_own() -> None:
    text = _asl_text()
    assert "arn:aws:" not in text
    assert text.count(INTEGRATION) >= 9
    assert _substitutions()["Partition"] == {"Ref": "AWS::Partition"}


def _substitutions() -> dict[str, Any]:
    return dict(properties(source(), "RenderStateMachine")["DefinitionSubstitutions"])


def _integrations(node: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """(resource ARN, parameters) of every Task state, ItemReader and ResultWriter, at any depth."""
    if isinstance(node, list):
        for item in node:
            yield from _integrations(item)
        return
    if not isinstance(node, dict):
        return
    resource = node.get("Resource")
    if isinstance(resource, str) and resource.startswith(INTEGRATION):
        yield resource, dict(node.get("Parameters", {}))
    for value in node.values():
        yield from _integrations(value)


def test_asl_is_valid_json_and_every_substitution_is_provided() -> None:
    # GIVEN the definition file and the state machine's DefinitionSubstitutions
    text = _asl_text()
    # WHEN it is parsed and its ${...} placeholders are collected
    definition = json.loads(text)
    placeholders = set(_SUB_NAME.findall(text))
    # THEN it is a state machine whose every placeholder the template substitutes
    assert definition["StartAt"] in definition["States"]
    assert placeholders
    assert placeholders - set(_substitutions()) == set()


def test_every_integration_in_the_asl_is_allowed_by_the_state_machine_role() -> None:
    # GIVEN the transformed template's state machine, its role and the definition's integrations
    template = transform("prod")
    conditions = Conditions(template, parameter_values(template, "prod"))
    machine = template["Resources"]["RenderStateMachine"]["Properties"]
    role_name = next(iter(references(machine["RoleArn"], conditions)))
    role_statements = list(statements(template["Resources"][role_name]))
    substitutions = machine["DefinitionSubstitutions"]
    definition = json.loads(_asl_text())
    integrations = list(_integrations(definition))
    assert integrations
    # WHEN each integration is turned into the IAM action it needs and the resources it touches
    missing: list[str] = []
    for resource, parameters in integrations:
        # arn:${Partition}:states:::sqs:sendMessage.waitForTaskToken, or an SDK call …:::aws-sdk:s3:putObject
        service, api = resource.removeprefix(INTEGRATION).split(".")[0].split(":")[-2:]
        action = f"{service}:{api[0].upper()}{api[1:]}"
        targets: set[str] = set()
        for key, value in parameters.items():
            if key.endswith(".$"):
                # Dynamic S3 locations are the work bucket's by contract (plans, map results); the ECS
                # calls name the merge service the WakeMergeService state holds.
                targets |= DYNAMIC_TARGETS.get(service, set())
            elif isinstance(value, str):
                for placeholder in _SUB_NAME.findall(value):
                    targets |= set(references(substitutions[placeholder], conditions))
        assert targets, f"{resource}: no resource found in {parameters}"
        # THEN some statement of the role allows that action on each of those resources
        for target in targets:
            if not any(
                allows(s, action) and target in set(references(s["Resource"], conditions)) for s in role_statements
            ):
                missing.append(f"{action} on {target} ({resource})")
    assert missing == []
    # AND a distributed map may start its child executions
    assert '"DISTRIBUTED"' in _asl_text()
    assert any(allows(s, "states:StartExecution") for s in role_statements)


# ---------------------------------------------------------------- (d) render queues


@pytest.mark.parametrize("queue", ["RenderQueueHigh", "RenderQueueNormal", "RenderQueueLow"])
def test_render_queue_attempts_come_from_the_parameter_and_end_in_a_dead_letter_queue(queue: str) -> None:
    # GIVEN a render queue as written
    template = source()
    redrive = properties(template, queue)["RedrivePolicy"]
    # WHEN its redrive policy is read
    dead_letter = redrive["deadLetterTargetArn"]["Fn::GetAtt"]
    dlq_name = dead_letter[0] if isinstance(dead_letter, list) else dead_letter.split(".")[0]
    # THEN the attempts are RenderMaxAttempts (the one number the workers read back from the queue)
    assert redrive["maxReceiveCount"] == {"Ref": "RenderMaxAttempts"}
    # AND the dead-letter queue is an unconditional queue that keeps messages longer than the source
    dlq = template["Resources"][dlq_name]
    assert dlq["Type"] == "AWS::SQS::Queue"
    assert "Condition" not in dlq
    assert dlq["Properties"]["MessageRetentionPeriod"] > properties(template, queue)["MessageRetentionPeriod"]


# ---------------------------------------------------------------- AWS wiring the code depends on


def test_slicer_function_is_built_by_the_makefile_and_gets_every_variable_the_handler_reads() -> None:
    # GIVEN the slicer function and the handler module it names
    template = source()
    function = template["Resources"]["SlicerFunction"]
    handler = function["Properties"]["Handler"]
    module_path = ROOT / (handler.rsplit(".", 1)[0].replace(".", "/") + ".py")
    # WHEN the handler's os.environ reads are collected
    tree = ast.parse(module_path.read_text())
    read: set[str] = set()
    for node in ast.walk(tree):
        is_subscript = isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ"
        is_get = isinstance(node, ast.Call) and ast.unparse(node.func) == "os.environ.get"
        if is_subscript and isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            read.add(str(node.slice.value))
        if is_get and isinstance(node, ast.Call) and isinstance(node.args[0], ast.Constant):
            read.add(str(node.args[0].value))
    provided = set(function["Properties"]["Environment"]["Variables"])
    # THEN the function sets each one (AWS_REGION comes from Lambda; AWS_ENDPOINT_URL is for LocalStack)
    assert module_path == SLICER_APP
    assert read - provided - {"AWS_REGION", "AWS_ENDPOINT_URL"} == set()
    assert any(f"def {handler.rsplit('.', 1)[1]}(" in line for line in module_path.read_text().splitlines())
    # AND sam build makes it with the Makefile target named after the function
    assert function["Metadata"]["BuildMethod"] == "makefile"
    assert function["Properties"]["CodeUri"] == "functions/"
    assert re.search(r"^build-SlicerFunction\b.*:", SLICER_MAKEFILE.read_text(), re.MULTILINE)
    # AND failed records go back to the ingest queue one by one
    event = function["Properties"]["Events"]["Ingest"]["Properties"]
    assert event["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert event["Queue"] == {"Fn::GetAtt": ["IngestQueue", "Arn"]}
    # AND the ingest queue hides a record for six function timeouts, as AWS advises for SQS sources
    assert properties(template, "IngestQueue")["VisibilityTimeout"] >= 6 * function["Properties"]["Timeout"]


def test_every_sqs_event_source_caps_its_concurrency_within_a_new_accounts_ten() -> None:
    # GIVEN the Lambda event source mappings SAM makes on AWS, and the default parameter values
    template = transform("prod")
    values = parameter_values(template, "prod")
    mappings = {
        name: resource["Properties"]
        for name, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Lambda::EventSourceMapping"
    }
    queues = {name for name, resource in template["Resources"].items() if resource["Type"] == "AWS::SQS::Queue"}
    sqs = {name: m for name, m in mappings.items() if m["EventSourceArn"]["Fn::GetAtt"][0] in queues}
    assert len(sqs) >= 5
    # WHEN each one's maximum concurrency is read (unset, an SQS event source scales to hundreds of
    # concurrent invocations and takes all of a new account's 10)
    maxima = {}
    for name, mapping in sqs.items():
        value = mapping.get("ScalingConfig", {}).get("MaximumConcurrency")
        maxima[name] = values[value["Ref"]] if isinstance(value, dict) else value
    # THEN every one has one, at least SQS's minimum of 2; those beside the slicer's take the minimum, so
    # at the defaults the slicer and one more function always find an execution left
    assert all(isinstance(value, int) and value >= 2 for value in maxima.values()), maxima
    others = {name: value for name, value in maxima.items() if not name.startswith("SlicerFunction")}
    assert set(others.values()) == {2}, others
    assert maxima[next(n for n in maxima if n.startswith("SlicerFunction"))] + 2 < 10


def test_workers_get_their_role_queues_in_priority_order_and_one_gpu() -> None:
    # GIVEN the render and merge task definitions
    template = source()
    render = properties(template, "RenderTaskDefinition")["ContainerDefinitions"][0]
    merge = properties(template, "MergeTaskDefinition")["ContainerDefinitions"][0]
    # WHEN their environments are read
    render_env = {item["Name"]: item["Value"] for item in render["Environment"]}
    merge_env = {item["Name"]: item["Value"] for item in merge["Environment"]}
    # THEN the render worker asks high, then normal, then low, on one GPU
    assert render_env["FUSIONFLEET_ROLE"] == "render"
    assert render_env["FUSIONFLEET_QUEUE_URLS"] == {
        "Fn::Join": [",", [{"Ref": "RenderQueueHigh"}, {"Ref": "RenderQueueNormal"}, {"Ref": "RenderQueueLow"}]]
    }
    assert render["ResourceRequirements"] == [{"Type": "GPU", "Value": "1"}]
    # AND the merge worker takes the merge queue
    assert merge_env["FUSIONFLEET_ROLE"] == "merge"
    assert merge_env["FUSIONFLEET_QUEUE_URLS"] == {"Ref": "MergeQueue"}
    assert {"AWS_REGION", "FUSIONFLEET_VISIBILITY_SECONDS"} <= set(render_env) & set(merge_env)


def test_worker_stop_timeout_matches_the_gpu_hosts_agent_timeout() -> None:
    # GIVEN the render container's stop timeout and the GPU hosts' user data
    template = source()
    stop_timeout = find_in_map(
        template, properties(template, "RenderTaskDefinition")["ContainerDefinitions"][0]["StopTimeout"]
    )
    user_data = properties(template, "GpuLaunchTemplate")["LaunchTemplateData"]["UserData"]["Fn::Base64"]["Fn::Sub"]
    script, variables = user_data
    # WHEN the user data's ECS agent settings are resolved
    rendered = script
    for name, value in variables.items():
        rendered = rendered.replace("${" + name + "}", str(find_in_map(template, value)))
    # THEN the agent waits as long as the task definition says, and GPU and Spot draining are on
    assert f"ECS_CONTAINER_STOP_TIMEOUT={stop_timeout}s" in rendered
    assert "ECS_ENABLE_GPU_SUPPORT=true" in rendered
    assert "ECS_ENABLE_SPOT_INSTANCE_DRAINING=true" in rendered
    assert "ECS_CLUSTER=${RenderCluster}" in rendered
    # AND the merge container (Fargate On-Demand: no Spot notice) drains within Fargate's 120 s at most
    merge = properties(template, "MergeTaskDefinition")["ContainerDefinitions"][0]
    assert stop_timeout <= find_in_map(template, merge["StopTimeout"]) <= 120


def test_a_render_worker_hung_in_its_engine_fails_its_health_check_and_an_idle_one_does_not() -> None:
    # GIVEN the render container (issue 45: a worker hung in the GPU driver kept its host forever, its
    # keeper thread extending its message while nothing rendered)
    template = source()
    render = properties(template, "RenderTaskDefinition")["ContainerDefinitions"][0]
    check = render.get("HealthCheck")
    env = {item["Name"]: item["Value"] for item in render["Environment"]}
    # THEN ECS runs the command that reads the render loop's own liveness record, where the worker writes it
    assert check is not None, "the render container has no HealthCheck"
    assert check["Command"] == ["CMD", "python", "-m", "gpu_worker.lifecycle.health"]
    assert env["FUSIONFLEET_LIVENESS_FILE"].startswith("/tmp/")
    # AND within ECS's bounds: interval 5-300 s, timeout 2-60 s (below the interval), retries 1-10, start 0-300 s
    assert 5 <= check["Interval"] <= 300 and 2 <= check["Timeout"] <= 60 and check["Timeout"] < check["Interval"]
    assert 1 <= check["Retries"] <= 10 and 0 <= check["StartPeriod"] <= 300
    # AND a hang is found within half an hour of the engine's last frame (the stall allowance, then the
    # retries), while a model load longer than the start period is still covered by the record's own allowance
    policy = LivenessPolicy()
    assert policy.stall_s + check["Interval"] * check["Retries"] <= 1800
    assert policy.start_s >= check["StartPeriod"]
    # AND the image's own HEALTHCHECK (plain Docker) runs the same command
    dockerfile = (ROOT / "gpu_worker" / "Dockerfile").read_text()
    render_stage = dockerfile[dockerfile.index("AS render") :]
    assert 'CMD ["python", "-m", "gpu_worker.lifecycle.health"]' in render_stage
    assert "FUSIONFLEET_LIVENESS_FILE=" + env["FUSIONFLEET_LIVENESS_FILE"] in render_stage


# EC2's Spot interruption notice: the host is reclaimed this long after it. The render task's SIGTERM comes
# later than the notice (the agent sees it, ECS drains the host and stops the task), so its drain must end
# with time to spare.
SPOT_NOTICE_S = 120
SPOT_MARGIN_S = 20


def test_a_render_worker_on_spot_is_killed_well_before_its_host_is_reclaimed() -> None:
    # GIVEN the render container's stop timeout (the GPU hosts' agent uses the same: the test above)
    template = source()
    render = properties(template, "RenderTaskDefinition")["ContainerDefinitions"][0]
    stop_timeout = find_in_map(template, render["StopTimeout"])
    # WHEN it is set against the Spot notice
    # THEN the drain ends with a margin for the notice's way to the task, and still leaves a drain
    assert 30 <= stop_timeout <= SPOT_NOTICE_S - SPOT_MARGIN_S


def test_gpu_capacity_can_go_to_zero_without_killing_a_render() -> None:
    # GIVEN the GPU Auto Scaling group and its capacity provider
    template = source()
    group = properties(template, "GpuAutoScalingGroup")
    provider = properties(template, "GpuCapacityProvider")["AutoScalingGroupProvider"]
    # WHEN their scaling settings are read
    # THEN the group may be empty, ECS manages it at 100 % and drains hosts it removes
    assert group["MinSize"] == "0"
    assert "DesiredCapacity" not in group
    assert provider["ManagedScaling"]["Status"] == "ENABLED"
    assert provider["ManagedScaling"]["TargetCapacity"] == 100
    assert provider["ManagedDraining"] == "ENABLED"
    # AND managed termination protection has the scale-in protection it requires
    assert provider["ManagedTerminationProtection"] == "ENABLED"
    assert group["NewInstancesProtectedFromScaleIn"] is True


def test_render_service_tracks_backlog_per_task_and_wakes_from_zero() -> None:
    # GIVEN the render service's scaling resources
    template = source()
    target = properties(template, "RenderScalableTarget")
    tracking = properties(template, "RenderBacklogTracking")
    metrics = tracking["TargetTrackingScalingPolicyConfiguration"]["CustomizedMetricSpecification"]["Metrics"]
    by_id = {metric["Id"]: metric for metric in metrics}
    returned = [metric for metric in metrics if metric.get("ReturnData", True)]
    # WHEN the tracked metric is read
    queue_metrics = [
        m["MetricStat"]["Metric"]
        for m in metrics
        if "MetricStat" in m and m["MetricStat"]["Metric"]["Namespace"] == "AWS/SQS"
    ]
    queues = {m["Dimensions"][0]["Value"]["Fn::GetAtt"][0] for m in queue_metrics}
    # THEN it is the render queues' visible messages divided by the running tasks, scaling down to the
    # minimum, which is 0 unless RenderMinTasks keeps a warm fleet
    assert target["MinCapacity"] == {"Ref": "RenderMinTasks"}
    assert source()["Parameters"]["RenderMinTasks"]["Default"] == 0
    assert {m["MetricName"] for m in queue_metrics} == {
        "ApproximateNumberOfMessagesVisible",
        "ApproximateNumberOfMessagesNotVisible",
    }
    assert queues == {"RenderQueueHigh", "RenderQueueNormal", "RenderQueueLow"}
    assert len(queue_metrics) == 6
    assert by_id["running"]["MetricStat"]["Metric"]["MetricName"] == "RunningTaskCount"
    assert by_id["running"]["MetricStat"]["Metric"]["Namespace"] == "ECS/ContainerInsights"
    assert len(returned) == 1
    # (fusionfleet/fleet/autoscale.py's rule: in-flight segments count, and the same cooldowns)
    expression = returned[0]["Expression"].replace(" ", "")
    assert expression == "(high+normal+low+high_busy+normal_busy+low_busy)/running"
    config = tracking["TargetTrackingScalingPolicyConfiguration"]
    assert (config["ScaleOutCooldown"], config["ScaleInCooldown"]) == AWS_COOLDOWNS
    # AND target tracking only scales out: its scale-in alarm, re-invoked every minute on stale datapoints,
    # cut the slicer's wake back (benchmarks/fleetsim/alarms.py); an idle alarm beyond the minimum scales in
    assert tracking["TargetTrackingScalingPolicyConfiguration"]["DisableScaleIn"] is True
    idle = properties(template, "RenderIdleAlarm")
    assert [action["Ref"] for action in idle["AlarmActions"]] == ["RenderScaleInPolicy"]
    assert properties(template, "RenderScaleInPolicy")["ScalingTargetId"] == {"Ref": "RenderScalableTarget"}
    # AND Container Insights publishes that task count
    assert {"Name": "containerInsights", "Value": "enabled"} in properties(template, "RenderCluster")["ClusterSettings"]
    # AND a backlog alarm sets one task on the same target when none is wanted
    alarm = properties(template, "RenderWakeAlarm")
    (policy_name,) = [action["Ref"] for action in alarm["AlarmActions"]]
    policy = properties(template, policy_name)
    assert policy["ScalingTargetId"] == {"Ref": "RenderScalableTarget"}
    assert policy["StepScalingPolicyConfiguration"]["AdjustmentType"] == "ExactCapacity"
    assert [step["ScalingAdjustment"] for step in policy["StepScalingPolicyConfiguration"]["StepAdjustments"]] == [1]
    wake_expression = next(m["Expression"] for m in alarm["Metrics"] if m.get("ReturnData", True))
    assert "desired" in wake_expression
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["Threshold"] == 0


def test_render_service_keeps_its_count_on_update_and_may_replace_every_task_on_deploy() -> None:
    # GIVEN the render service
    service = properties(source(), "RenderService")
    # WHEN its count and deployment settings are read
    deployment = service["DeploymentConfiguration"]
    # THEN it states the minimum as its count: a creation starts no GPU task (CloudFormation waits for
    # none), an update resets to the minimum only the idle workers (busy ones are protected from
    # scale-in); it runs on the GPU capacity provider and needs no spare GPU
    parameters = source()["Parameters"]
    assert service["DesiredCount"] == {"Ref": "RenderMinTasks"} and parameters["RenderMinTasks"]["Default"] == 0
    assert properties(source(), "MergeService")["DesiredCount"] == {"Ref": "MergeMinTasks"}
    assert parameters["MergeMinTasks"]["Default"] == 0
    assert service["CapacityProviderStrategy"][0]["CapacityProvider"] == {"Ref": "GpuCapacityProvider"}
    assert deployment["MinimumHealthyPercent"] == 0


def _breaches(alarm: dict[str, Any], minute: dict[str, float | None]) -> bool:
    """One datapoint of a metric-math alarm: its returned expression over one minute's values (None: no
    data), then the comparison, a missing result as TreatMissingData says (only `breaching` breaches)."""
    (returned,) = [query for query in alarm["Metrics"] if query.get("ReturnData", True)]
    python = re.sub(r"\bAND\b", " and ", re.sub(r"\bOR\b", " or ", returned["Expression"]))
    python = re.sub(r"(?<![<>=!])=(?!=)", "==", python)
    functions = {
        "FILL": lambda value, fill: fill if value is None else value,
        "IF": lambda condition, then, otherwise: then if condition else otherwise,
    }
    try:
        value = eval(python, {"__builtins__": {}}, {**functions, **minute})  # the template's own expression
    except TypeError:  # arithmetic on a missing value: no datapoint
        value = None
    if value is None:
        return bool(alarm.get("TreatMissingData") == "breaching")
    compare = {
        "GreaterThanThreshold": float.__gt__, "GreaterThanOrEqualToThreshold": float.__ge__,
        "LessThanThreshold": float.__lt__, "LessThanOrEqualToThreshold": float.__le__,
    }[alarm["ComparisonOperator"]]  # fmt: skip
    return bool(compare(float(value), float(alarm["Threshold"])))


def _in_alarm(alarm: dict[str, Any], minutes: list[dict[str, float | None]]) -> bool:
    recent = minutes[-int(alarm["EvaluationPeriods"]) :]
    return sum(_breaches(alarm, minute) for minute in recent) >= int(alarm["DatapointsToAlarm"])


def test_the_merge_scale_in_alarm_fires_only_on_a_task_idle_for_minutes_never_on_a_service_at_zero() -> None:
    # GIVEN the merge service's scale-in alarm (CloudWatch invokes its scaling action again every minute
    # it stays in ALARM) and the metrics it reads, by query id
    alarm = _alarm(source(), "MergeIdleAlarm")
    stats = {query["Id"]: query["MetricStat"] for query in alarm["Metrics"] if "MetricStat" in query}
    running = next((name for name, stat in stats.items() if stat["Metric"]["Namespace"] == "AWS/ECS"), "running")
    queue = {
        stat["Metric"]["MetricName"]: name for name, stat in stats.items() if stat["Metric"]["Namespace"] == "AWS/SQS"
    }
    waiting, in_flight = queue["ApproximateNumberOfMessagesVisible"], queue["ApproximateNumberOfMessagesNotVisible"]

    def minutes(count: int, task: bool, work: float | None) -> list[dict[str, float | None]]:
        # ECS publishes a service's CPUUtilization only while a task of it runs; an idle queue may publish nothing
        return [{running: 1.0 if task else None, waiting: work, in_flight: work}] * count

    # WHEN the service sits at zero with an idle queue (publishing zeros, or nothing at all) for an hour,
    # THEN the alarm stays out of ALARM: the state machine's WakeMerge (0 -> 1) is not undone a minute later
    assert not _in_alarm(alarm, minutes(60, task=False, work=0.0))
    assert not _in_alarm(alarm, minutes(60, task=False, work=None))
    # WHEN a woken task has started and not yet taken its merge (well under the alarm's window)
    assert not _in_alarm(alarm, minutes(60, task=False, work=0.0) + minutes(3, task=True, work=0.0))
    # WHEN a task merges, THEN it is not scaled in
    assert not _in_alarm(alarm, minutes(60, task=True, work=1.0))
    # WHEN a task has run with no merge waiting or in progress for the whole window, THEN it is scaled in
    assert _in_alarm(alarm, minutes(10, task=True, work=0.0))
    assert _in_alarm(alarm, minutes(10, task=True, work=None))
    assert alarm["EvaluationPeriods"] == alarm["DatapointsToAlarm"] and alarm["EvaluationPeriods"] * 60 >= 600
    assert all(stat["Period"] == 60 for stat in stats.values())
    service = {d["Name"]: d["Value"] for d in stats[running]["Metric"]["Dimensions"]}
    assert service["ServiceName"] == {"Fn::GetAtt": ["MergeService", "Name"]}
    # AND the scale-in policy waits out the stopped task's last datapoints before it may act again
    policy = properties(source(), "MergeScaleInPolicy")["StepScalingPolicyConfiguration"]
    assert policy["Cooldown"] >= 300


# ---------------------------------------------------------------- (e) operations: alarms, dashboard, cost


def _alarm(template: Template, name: str) -> dict[str, Any]:
    resource = template["Resources"][name]
    assert resource["Type"] == "AWS::CloudWatch::Alarm", name
    assert resource.get("Condition") == "IsAws", name
    return dict(resource["Properties"])


def _notifies_operators(alarm: dict[str, Any]) -> bool:
    return alarm["AlarmActions"] == [{"Ref": "OpsTopic"}] and alarm.get("OKActions") == [{"Ref": "OpsTopic"}]


def test_operators_have_a_topic_of_their_own_with_an_optional_email() -> None:
    # GIVEN the template
    template = source()
    # THEN the operators' topic exists on every stage, apart from the job notices' topic
    assert template["Resources"]["OpsTopic"]["Type"] == "AWS::SNS::Topic"
    assert "Condition" not in template["Resources"]["OpsTopic"]
    # AND an e-mail address subscribes to it only when one is given
    subscription = template["Resources"]["OpsEmailSubscription"]
    assert subscription["Condition"] == "HasOpsEmail"
    assert subscription["Properties"]["TopicArn"] == {"Ref": "OpsTopic"}
    assert subscription["Properties"]["Endpoint"] == {"Ref": "OpsNotificationEmail"}
    assert template["Parameters"]["OpsNotificationEmail"]["Default"] == ""


@pytest.mark.parametrize(
    "queue",
    [
        "IngestDeadLetterQueue", "RenderDeadLetterQueue", "MergeDeadLetterQueue", "WebhookDeadLetterQueue",
        "NoticeFollowDeadLetterQueue",
    ],
)  # fmt: skip
def test_any_dead_letter_alarms_the_operators(queue: str) -> None:
    alarm = _alarm(source(), f"{queue}DepthAlarm")
    assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/SQS", "ApproximateNumberOfMessagesVisible")
    assert alarm["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue, "QueueName"]}}]
    assert (alarm["ComparisonOperator"], alarm["Threshold"], alarm["Statistic"]) == (
        "GreaterThanThreshold",
        0,
        "Maximum",
    )
    assert _notifies_operators(alarm)


def test_each_priority_alarms_on_its_oldest_message_before_the_accepted_backlog_runs_out() -> None:
    # GIVEN the age alarms of the three render queues
    template = source()
    thresholds = []
    for queue in ("RenderQueueHigh", "RenderQueueNormal", "RenderQueueLow"):
        alarm = _alarm(template, f"{queue}AgeAlarm")
        assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/SQS", "ApproximateAgeOfOldestMessage")
        assert alarm["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue, "QueueName"]}}]
        assert alarm["ComparisonOperator"] == "GreaterThanThreshold" and _notifies_operators(alarm)
        thresholds.append(alarm["Threshold"] + alarm["Period"] * alarm["EvaluationPeriods"])
    # THEN a higher priority alarms sooner, and even the lowest well before its segments' tokens time out
    backlog = int(template["Parameters"]["AcceptedBacklogSeconds"]["Default"])
    assert thresholds == sorted(thresholds) and thresholds[-1] <= backlog * 0.6


def test_timed_out_jobs_alarm_the_operators() -> None:
    alarm = _alarm(source(), "RenderExecutionsTimedOutAlarm")
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == ("AWS/States", "ExecutionsTimedOut", "Sum")
    assert alarm["Dimensions"] == [{"Name": "StateMachineArn", "Value": {"Ref": "RenderStateMachine"}}]
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)
    assert _notifies_operators(alarm)


def test_jobs_the_fleet_failed_alarm_the_operators_and_failures_a_user_caused_do_not() -> None:
    # GIVEN the failed-jobs alarm (it was on AWS/States ExecutionsFailed: every cancel that raced a job's
    # end, and every job whose own input was refused, paged the operators)
    template = source()
    alarm = _alarm(template, "RenderExecutionsFailedAlarm")
    assert (alarm["ComparisonOperator"], alarm["Threshold"], alarm["Statistic"]) == ("GreaterThanThreshold", 0, "Sum")
    assert _notifies_operators(alarm)
    # THEN it counts the metric a filter makes of the state machine's own failures, from its ERROR log
    (metric_filter,) = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Logs::MetricFilter"
        and r["Properties"]["LogGroupName"] == {"Ref": "RenderStateMachineLogGroup"}
    ]
    (transformation,) = metric_filter["MetricTransformations"]
    assert (transformation["MetricNamespace"], transformation["MetricName"]) == (
        alarm["Namespace"], alarm["MetricName"],
    )  # fmt: skip
    machine = template["Resources"]["RenderStateMachine"]["Properties"]
    assert machine["Logging"]["Fn::If"][1]["Level"] in ("ERROR", "ALL")
    # AND it leaves out exactly the errors a user causes: a job refused on its own input, a cancel's claim
    pattern = metric_filter["FilterPattern"]
    assert '($.type = "ExecutionFailed")' in pattern
    left_out = set(re.findall(r'\$\.details\.error != "([A-Za-z]+)"', pattern))
    assert left_out == {NOTIFIED_INPUT_FAILURE_ERROR, NOTICE_NOT_CLAIMED_ERROR}


def _functions() -> list[str]:
    return sorted(n for n, r in source()["Resources"].items() if r["Type"] == "AWS::Serverless::Function")


@pytest.mark.parametrize("function", _functions())
@pytest.mark.parametrize("metric", ["Errors", "Throttles"])
def test_every_functions_errors_and_throttles_alarm_the_operators(function: str, metric: str) -> None:
    # GIVEN every Lambda function of the template (a function added later is held to the same rule)
    (alarm,) = [
        _alarm(source(), name)
        for name, r in source()["Resources"].items()
        if r["Type"] == "AWS::CloudWatch::Alarm"
        and r["Properties"].get("MetricName") == metric
        and r["Properties"].get("Dimensions") == [{"Name": "FunctionName", "Value": {"Ref": function}}]
    ]
    # THEN one alarm on its Lambda metric fires at the first failed or refused invocation
    assert (alarm["Namespace"], alarm["Statistic"]) == ("AWS/Lambda", "Sum")
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)
    assert _notifies_operators(alarm)


def test_the_apis_5xx_answers_alarm_the_operators_and_every_request_is_logged() -> None:
    template = source()
    alarm = _alarm(template, "HttpApi5xxAlarm")
    assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/ApiGateway", "5xx")
    assert {"Name": "ApiId", "Value": {"Ref": "HttpApi"}} in alarm["Dimensions"]
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)
    assert _notifies_operators(alarm)
    # AND the API writes an access log line per request, with its status and the integration's error
    settings = properties(template, "HttpApi")["AccessLogSettings"]
    assert settings["DestinationArn"] == {"Fn::GetAtt": ["HttpApiAccessLogGroup", "Arn"]}
    fields = json.loads(settings["Format"])
    assert {"status", "requestId", "integrationError"} <= set(fields)


def test_the_state_machine_logs_its_errors_on_aws() -> None:
    # GIVEN the state machine as CloudFormation receives it for an AWS stage
    template = transform("prod")
    name, when_true, when_false = template["Resources"]["RenderStateMachine"]["Properties"]["LoggingConfiguration"][
        "Fn::If"
    ]
    # THEN on AWS every execution's errors go to a log group of the stack (LocalStack: none)
    assert (name, when_false) == ("IsAws", {"Ref": "AWS::NoValue"})
    assert when_true["Level"] in {"ERROR", "ALL"}
    (destination,) = when_true["Destinations"]
    group = destination["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0]
    assert template["Resources"][group]["Type"] == "AWS::Logs::LogGroup"


@pytest.mark.parametrize(("service", "minutes"), [("RenderService", 15), ("MergeService", 5)])
def test_a_service_short_of_its_desired_workers_alarms_after_a_start_up_allowance(service: str, minutes: int) -> None:
    # GIVEN the service's workers-short alarm
    alarm = _alarm(source(), f"{service.removesuffix('Service')}WorkersShortAlarm")
    by_id = {metric["Id"]: metric for metric in alarm["Metrics"]}
    # THEN it compares desired with running tasks of that service (Container Insights)
    for name, metric_name in (("desired", "DesiredTaskCount"), ("running", "RunningTaskCount")):
        metric = by_id[name]["MetricStat"]["Metric"]
        assert (metric["Namespace"], metric["MetricName"]) == ("ECS/ContainerInsights", metric_name)
        assert {"Name": "ServiceName", "Value": {"Fn::GetAtt": [service, "Name"]}} in metric["Dimensions"]
    (returned,) = [metric for metric in alarm["Metrics"] if metric.get("ReturnData", True)]
    assert returned["Expression"].replace(" ", "") == "FILL(desired,0)-FILL(running,0)"
    # AND only a shortfall that outlasts starting a worker counts
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)
    assert alarm["DatapointsToAlarm"] == alarm["EvaluationPeriods"] >= minutes
    assert _notifies_operators(alarm)


def test_every_job_the_watchdog_closes_is_counted_and_alarms_the_operators() -> None:
    # GIVEN what the watchdog Lambda logs for each job it closes
    handler = ast.parse((ROOT / "functions" / "watchdog" / "app.py").read_text())
    logged = {
        node.args[0].value
        for node in ast.walk(handler)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "warning"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    }
    template = source()
    metric_filter = template["Resources"]["WatchdogActionsMetricFilter"]
    assert metric_filter["Condition"] == "IsAws"
    filter_properties = metric_filter["Properties"]
    # THEN a metric filter on its log group matches that line (Powertools logs it as JSON "message")
    assert filter_properties["LogGroupName"] == {"Ref": "WatchdogLogGroup"}
    match = re.fullmatch(r'\{ \$\.message = "([^"]+)" \}', filter_properties["FilterPattern"])
    assert match and match.group(1) in logged
    (transformation,) = filter_properties["MetricTransformations"]
    # AND the alarm watches that metric, on any action
    alarm = _alarm(template, "WatchdogActionsAlarm")
    assert (alarm["Namespace"], alarm["MetricName"]) == (
        transformation["MetricNamespace"],
        transformation["MetricName"],
    )
    assert (alarm["Statistic"], alarm["ComparisonOperator"], alarm["Threshold"]) == ("Sum", "GreaterThanThreshold", 0)
    assert _notifies_operators(alarm)


def test_the_dashboard_is_valid_json_and_shows_every_alarm() -> None:
    # GIVEN the dashboard and every alarm that notifies the operators
    template = source()
    dashboard = template["Resources"]["OperationsDashboard"]
    assert dashboard["Condition"] == "IsAws"
    body, variables = dashboard["Properties"]["DashboardBody"]["Fn::Sub"]
    alarms = {
        name
        for name, resource in template["Resources"].items()
        if resource["Type"] == "AWS::CloudWatch::Alarm"
        and resource["Properties"].get("AlarmActions") == [{"Ref": "OpsTopic"}]
    }
    assert len(alarms) == 24
    # WHEN its substitutions are filled in
    names = set(_SUB_NAME.findall(body))
    assert {f"{alarm}.Arn" for alarm in alarms} <= names
    assert names - set(variables) - {f"{a}.Arn" for a in alarms} <= {
        "AWS::Region",
        "AWS::StackName",
        "RenderStateMachine",
        "RenderCluster",
    }
    filled = _SUB_NAME.sub("x", body)
    # THEN it is one JSON document with an alarm widget listing them all and a graph for each concern
    widgets = json.loads(filled)["widgets"]
    assert len(widgets[0]["properties"]["alarms"]) == len(alarms)
    titles = " ".join(widget["properties"].get("title", "") for widget in widgets)
    for concern in ("Dead-letter", "Oldest waiting", "executions", "running vs desired", "watchdog"):
        assert concern in titles


def test_the_merge_prices_jobs_at_the_stacks_gpu_price() -> None:
    template = source()
    merge = properties(template, "MergeTaskDefinition")["ContainerDefinitions"][0]
    env = {item["Name"]: item["Value"] for item in merge["Environment"]}
    assert env["FUSIONFLEET_GPU_HOURLY_PRICE"] == {"Ref": "GpuHourlyPrice"}
    assert float(template["Parameters"]["GpuHourlyPrice"]["Default"]) > 0

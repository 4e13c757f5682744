"""IAM call recording on the local stack: which role each process runs as, what the stack is, and the
state machine's own calls (a test instrument; fusionfleet/adapters/call_recording.py records the rest).

Each process gets the logical id of the role its AWS counterpart has (the SAM-transformed template's
names); the judge (tests/support/iam/) evaluates its calls against that role's policies. The state
machine's service integrations run inside LocalStack, where no hook reaches them: they are read back
from the executions' histories before the stack stops, and written in the same form as the processes'.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from fleetctl.stack import StackResources
from fusionfleet.adapters.aws import AwsTarget
from fusionfleet.environment.contract import from_env
from fusionfleet.environment.recording import IamRecordingEnvironment
from fusionfleet.environment.settings import FUSIONFLEET_IAM_PROCESS, FUSIONFLEET_IAM_ROLE

logger = logging.getLogger(__name__)

# The role (logical id in the transformed template) of each kind of local process's AWS counterpart.
SLICER_ROLE = "SlicerFunctionRole"
WATCHDOG_ROLE = "WatchdogFunctionRole"
DEAD_LETTERS_ROLE = "DeadLetterFunctionRole"
RENDER_ROLE = "RenderTaskRole"
MERGE_ROLE = "MergeTaskRole"
API_ROLE = "ApiFunctionRole"
JOB_EVENTS_ROLE = "JobEventsFunctionRole"
STATE_MACHINE_ROLE = "RenderStateMachineRole"
# People: the CLI and the operator's dashboard run with an operator's credentials, which the stack's
# OperatorPolicy is for.
OPERATOR_POLICY = "OperatorPolicy"
STATE_MACHINE_PROCESS = "state machine"


def role_env(role: str, process: str | None = None) -> dict[str, str]:
    """The variables that make a process record its calls as `role` (when recording is on at all)."""
    return {FUSIONFLEET_IAM_ROLE: role, **({FUSIONFLEET_IAM_PROCESS: process} if process else {})}


def stack_file(record_dir: Path, endpoint: str, stack: str) -> Path:
    return record_dir / f"stack-{stack}-{_port(endpoint)}-{time.time_ns()}.json"


def _port(endpoint: str) -> str:
    return endpoint.rstrip("/").rsplit(":", 1)[-1]


def describe_stack(cloudformation: Any, stack: str, endpoint: str, region: str) -> dict[str, Any]:
    """What the judge resolves the template against: each resource's type and physical id."""
    resources = cloudformation.describe_stack_resources(StackName=stack)["StackResources"]
    return {
        "stack": stack,
        "endpoint": endpoint,
        "region": region,
        "started": time.time(),
        "stopped": None,
        "resources": {r["LogicalResourceId"]: {"type": r["ResourceType"], "physical": r["PhysicalResourceId"]}
                      for r in resources},
    }  # fmt: skip


def write_stack(path: Path, description: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(description, indent=1, sort_keys=True))


# ---------------------------------------------------------------- the state machine's own calls


def state_machine_calls(sfn: Any, state_machine_arn: str, endpoint: str, region: str) -> Iterator[dict[str, Any]]:
    """Every call the state machine's executions made, as recorded lines (Map children included)."""
    definition = json.loads(sfn.describe_state_machine(stateMachineArn=state_machine_arn)["definition"])
    for page in sfn.get_paginator("list_executions").paginate(stateMachineArn=state_machine_arn):
        for execution in page["executions"]:
            yield from _execution_calls(sfn, execution["executionArn"], state_machine_arn, definition, endpoint, region)


def _execution_calls(
    sfn: Any, execution_arn: str, state_machine_arn: str, definition: Mapping[str, Any], endpoint: str, region: str
) -> Iterator[dict[str, Any]]:
    map_input: dict[str, Any] = {}
    for event in _history(sfn, execution_arn):
        for service, operation, params in calls_of_event(event):
            yield recorded_line(service, operation, params, event, endpoint, region)
        if event.get("type") == "MapStateEntered":
            map_input = json.loads(event["stateEnteredEventDetails"].get("input") or "{}")
        details = event.get("mapRunStartedEventDetails")
        if details:
            # LocalStack 2026.3.0 cannot list a Map Run's children (ListExecutions with mapRunArn
            # fails), so their calls come from the ASL: each child starts, is watched, and runs the
            # item processor on its item, whose tasks here take the job from the Map's input.
            map_run = details["mapRunArn"]
            children = int(sfn.describe_map_run(mapRunArn=map_run)["itemCounts"]["total"])
            processor = _item_processor(definition)
            child_calls = processor_calls(processor, map_input) if processor else []
            for number in range(children):
                child = map_run.replace(":mapRun:", ":execution:", 1) + f"-{number}"
                calls = [
                    ("states", "StartExecution", {"stateMachineArn": state_machine_arn}),
                    ("states", "DescribeExecution", {"executionArn": child}),
                    *child_calls,
                ]
                for service, operation, params in calls:
                    yield recorded_line(service, operation, params, event, endpoint, region)


def _history(sfn: Any, execution_arn: str) -> Iterator[dict[str, Any]]:
    for page in sfn.get_paginator("get_execution_history").paginate(executionArn=execution_arn):
        yield from page["events"]


def _item_processor(definition: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for state in definition.get("States", {}).values():
        processor = state.get("ItemProcessor") or state.get("Iterator")
        if state.get("Type") == "Map" and processor:
            return dict(processor)
    return None


def processor_calls(processor: Mapping[str, Any], item: Mapping[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """The service calls one Map child makes, walking its states for `item` (Choice on StringEquals,
    Task, Pass; the forms render.asl.json uses). Pure."""
    states = processor["States"]
    calls: list[tuple[str, str, dict[str, Any]]] = []
    name: str | None = processor["StartAt"]
    seen: set[str] = set()
    while name is not None and name not in seen:
        seen.add(name)
        state = states[name]
        if state["Type"] == "Choice":
            name = next((c["Next"] for c in state.get("Choices", []) if _chooses(c, item)), state.get("Default"))
            continue
        if state["Type"] == "Task":
            resource_type, resource = task_resource(str(state["Resource"]))
            parameters = {k: v for k, v in state.get("Parameters", {}).items() if not k.endswith(".$")}
            calls.append(integration_call(resource_type, resource, parameters))
        name = None if state.get("End") else state.get("Next")
    return calls


def _chooses(choice: Mapping[str, Any], item: Mapping[str, Any]) -> bool:
    path = str(choice.get("Variable", "")).removeprefix("$.").split(".")
    value: Any = item
    for part in path:
        value = value.get(part) if isinstance(value, Mapping) else None
    return "StringEquals" in choice and value == choice["StringEquals"]


def task_resource(arn: str) -> tuple[str, str]:
    """`arn:<partition>:states:::sqs:sendMessage.waitForTaskToken` → (`sqs`, `sendMessage.waitForTaskToken`);
    `…:::aws-sdk:s3:putObject` → (`aws-sdk:s3`, `putObject`). Pure."""
    integration = arn.split(":::", 1)[1]
    resource_type, _, resource = integration.rpartition(":")
    return resource_type, resource


def calls_of_event(event: Mapping[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """The AWS calls one history event stands for: a task's service integration, a Map's ItemReader. Pure."""
    scheduled = event.get("taskScheduledEventDetails")
    if scheduled:
        parameters = json.loads(scheduled.get("parameters") or "{}")
        return [integration_call(str(scheduled["resourceType"]), str(scheduled["resource"]), parameters)]
    entered = event.get("stateEnteredEventDetails")
    if event.get("type") == "MapStateEntered" and entered:
        plan = json.loads(entered.get("input") or "{}").get("plan")
        if isinstance(plan, dict) and "bucket" in plan and "key" in plan:
            # The Distributed Map's ItemReader reads the plan (render.asl.json: $.plan.bucket/key).
            return [("s3", "GetObject", {"Bucket": plan["bucket"], "Key": plan["key"]})]
    return []


def integration_call(
    resource_type: str, resource: str, parameters: Mapping[str, Any]
) -> tuple[str, str, dict[str, Any]]:
    """An ASL task resource (`sqs` + `sendMessage.waitForTaskToken`, `aws-sdk:s3` + `putObject`) as the
    service and API operation it calls. Pure."""
    service = resource_type.removeprefix("aws-sdk:")
    operation = resource.split(".", 1)[0]
    return service, operation[:1].upper() + operation[1:], dict(parameters)


def recorded_line(
    service: str, operation: str, params: Mapping[str, Any], event: Mapping[str, Any], endpoint: str, region: str
) -> dict[str, Any]:
    stamp = event.get("timestamp")
    return {
        "t": stamp.timestamp() if isinstance(stamp, datetime) else time.time(),
        "role": STATE_MACHINE_ROLE,
        "process": STATE_MACHINE_PROCESS,
        "service": "states" if service == "stepfunctions" else service,
        "operation": operation,
        "params": {k: v for k, v in params.items() if k not in ("MessageBody", "Message", "Body")},
        "presigned": False,
        "endpoint": endpoint,
        "region": region,
    }


def record_state_machine(sfn: Any, state_machine_arn: str, endpoint: str, region: str, record_dir: Path) -> int:
    """Writes the state machine's calls beside the processes' (before the stack stops); how many."""
    path = record_dir / f"calls-state-machine-{time.time_ns()}.jsonl"
    count = 0
    with path.open("w", encoding="utf-8") as out:
        for line in state_machine_calls(sfn, state_machine_arn, endpoint, region):
            out.write(json.dumps(line, sort_keys=True, default=str) + "\n")
            count += 1
    return count


# ---------------------------------------------------------------- at `local up` and `local down`


def record_dir() -> Path | None:
    """Where IAM calls are recorded, when the environment of `local up`/`down` asks for it."""
    return from_env(IamRecordingEnvironment, os.environ).record_dir


def record_at_up(cloudformation: Any, stack: str, endpoint: str, region: str) -> None:
    """With recording on, the deployed stack's resources, for the judge to resolve the template against."""
    folder = record_dir()
    if folder is not None:
        write_stack(stack_file(folder, endpoint, stack), describe_stack(cloudformation, stack, endpoint, region))


def record_at_down(say: Callable[[str], None], endpoint: str, region: str, outputs: Mapping[str, str]) -> None:
    """With recording on, the state machine's own calls, read back before LocalStack stops."""
    folder = record_dir()
    if folder is None:
        return
    sfn = AwsTarget(region, endpoint, record_calls=False).client("stepfunctions")
    arn = StackResources.from_outputs(dict(outputs)).state_machine_arn
    try:
        count = record_state_machine(sfn, arn, endpoint, region, folder)
    except Exception as error:  # a recording that cannot be read back says so; the stack still stops
        say(f"the state machine's calls could not be read back for the IAM judge: {error}")
    else:
        say(f"recorded {count} calls of the state machine in {folder}")
    # The stack's life ends here: later calls to the same port belong to another stack.
    for path in folder.glob(f"stack-*-{_port(endpoint)}-*.json"):
        description = json.loads(path.read_text())
        if description.get("endpoint") == endpoint and description.get("stopped") is None:
            write_stack(path, {**description, "stopped": time.time()})

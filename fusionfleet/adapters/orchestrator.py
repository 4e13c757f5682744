"""The job orchestrator: a small protocol and its Step Functions adapter."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import ClientError

from fusionfleet.errors import TokenGone

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions import SFNClient


class ExecutionStatus(StrEnum):
    """Step Functions' execution statuses, in its API's words: the only place they are spelled (a job's
    own states are fusionfleet.jobs.states', which maps these to them)."""

    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    TIMED_OUT = "TIMED_OUT"
    ABORTED = "ABORTED"
    PENDING_REDRIVE = "PENDING_REDRIVE"  # a redriven execution about to run again


TERMINAL = (ExecutionStatus.SUCCEEDED, ExecutionStatus.FAILED, ExecutionStatus.TIMED_OUT, ExecutionStatus.ABORTED)
LISTED_STATUSES = (ExecutionStatus.RUNNING, *TERMINAL)  # every status ListExecutions is asked for
# Step Functions caps error names at 256 and causes at 32768 characters.
MAX_ERROR = 256
MAX_CAUSE = 32768


@dataclass(frozen=True)
class Execution:
    arn: str
    status: str
    started: datetime | None = None
    stopped: datetime | None = None
    output: dict[str, Any] | None = None
    error: str | None = None
    cause: str | None = None
    input: dict[str, Any] | None = None  # from describe only

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL

    @property
    def running(self) -> bool:
        return self.status == ExecutionStatus.RUNNING

    @property
    def name(self) -> str:
        return self.arn.rsplit(":", 1)[-1]


@dataclass(frozen=True)
class Progress:
    total: int = 0
    succeeded: int = 0
    failed: int = 0
    running: int = 0
    pending: int = 0


class ExecutionMissing(Exception):
    pass


class TaskCallbacks(Protocol):
    """What a worker needs of the orchestrator: answer and keep alive the task it holds."""

    def task_success(self, token: str, output: dict[str, Any]) -> None: ...
    def task_failure(self, token: str, error: str, cause: str) -> None: ...
    def heartbeat(self, token: str) -> None: ...


class Orchestrator(TaskCallbacks, Protocol):
    def start(self, state_machine_arn: str, name: str, payload: dict[str, Any]) -> str: ...
    def describe(self, execution_arn: str) -> Execution: ...
    def progress(self, execution_arn: str) -> Progress | None: ...
    def list_executions(self, state_machine_arn: str, status: str) -> list[Execution]: ...
    def running_executions(self, state_machine_arn: str) -> list[Execution]: ...
    def stop(self, execution_arn: str, error: str, cause: str) -> None: ...
    def state_output(self, execution_arn: str, state_names: tuple[str, ...]) -> dict[str, Any] | None: ...


def execution_arn(state_machine_arn: str, name: str) -> str:
    """An execution's ARN follows from its state machine and name (how clients find a job by id)."""
    prefix, _, machine = state_machine_arn.partition(":stateMachine:")
    return f"{prefix}:execution:{machine}:{name}"


class StepFunctions:
    def __init__(self, client: SFNClient) -> None:
        self._sfn = client

    def start(self, state_machine_arn: str, name: str, payload: dict[str, Any]) -> str:
        """Start the execution `name`, or find it when it exists already (a duplicate event)."""
        try:
            response = self._sfn.start_execution(
                stateMachineArn=state_machine_arn, name=name, input=json.dumps(payload, sort_keys=True)
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ExecutionAlreadyExists":
                return execution_arn(state_machine_arn, name)
            raise
        # Same name and input as a running execution returns that execution again.
        return response["executionArn"]

    def describe(self, execution_arn: str) -> Execution:
        try:
            response = self._sfn.describe_execution(executionArn=execution_arn)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ExecutionDoesNotExist":
                raise ExecutionMissing(execution_arn) from error
            raise
        output = response.get("output")
        payload = response.get("input")
        return Execution(
            arn=execution_arn,
            status=response["status"],
            started=response.get("startDate"),
            stopped=response.get("stopDate"),
            output=json.loads(output) if output else None,
            error=response.get("error"),
            cause=response.get("cause"),
            input=json.loads(payload) if payload else None,
        )

    def progress(self, execution_arn: str) -> Progress | None:
        """Item counts of the execution's Distributed Map run, or None before the map has started."""
        runs = self._sfn.list_map_runs(executionArn=execution_arn).get("mapRuns", [])
        if not runs:
            return None
        counts = self._sfn.describe_map_run(mapRunArn=runs[0]["mapRunArn"])["itemCounts"]
        return Progress(
            total=int(counts.get("total", 0)),
            succeeded=int(counts.get("succeeded", 0)),
            failed=int(counts.get("failed", 0)) + int(counts.get("timedOut", 0)) + int(counts.get("aborted", 0)),
            running=int(counts.get("running", 0)),
            pending=int(counts.get("pending", 0)),
        )

    def list_executions(self, state_machine_arn: str, status: str) -> list[Execution]:
        """The state machine's executions in `status`, newest first (no output: describe for that)."""
        found = []
        pages = self._sfn.get_paginator("list_executions").paginate(
            stateMachineArn=state_machine_arn,
            statusFilter=status,  # type: ignore[arg-type]
        )
        for page in pages:
            for item in page.get("executions", []):
                found.append(
                    Execution(
                        arn=item["executionArn"],
                        status=item["status"],
                        started=item.get("startDate"),
                        stopped=item.get("stopDate"),
                    )
                )
        return found

    def running_executions(self, state_machine_arn: str) -> list[Execution]:
        """The state machine's running executions, newest first: the farm's running jobs."""
        return self.list_executions(state_machine_arn, ExecutionStatus.RUNNING)

    def stop(self, execution_arn: str, error: str, cause: str) -> None:
        try:
            self._sfn.stop_execution(executionArn=execution_arn, error=error[:MAX_ERROR], cause=cause[:MAX_CAUSE])
        except ClientError as error_:
            if error_.response.get("Error", {}).get("Code") == "ExecutionDoesNotExist":
                raise ExecutionMissing(execution_arn) from error_
            raise

    def state_output(self, execution_arn: str, state_names: tuple[str, ...]) -> dict[str, Any] | None:
        """The output of the last of `state_names` the execution left, from its history; None if none."""
        pages = self._sfn.get_paginator("get_execution_history").paginate(
            executionArn=execution_arn, reverseOrder=True, includeExecutionData=True
        )
        for page in pages:
            for event in page.get("events", []):
                details = event.get("stateExitedEventDetails")
                if details and details.get("name") in state_names and details.get("output"):
                    value = json.loads(details["output"])
                    return value if isinstance(value, dict) else None
        return None

    def task_success(self, token: str, output: dict[str, Any]) -> None:
        self._callback(lambda: self._sfn.send_task_success(taskToken=token, output=json.dumps(output)))

    def task_failure(self, token: str, error: str, cause: str) -> None:
        self._callback(
            lambda: self._sfn.send_task_failure(taskToken=token, error=error[:MAX_ERROR], cause=cause[:MAX_CAUSE])
        )

    def heartbeat(self, token: str) -> None:
        self._callback(lambda: self._sfn.send_task_heartbeat(taskToken=token))

    @staticmethod
    def _callback(call: Any) -> None:
        try:
            call()
        except ClientError as error:
            code = str(error.response.get("Error", {}).get("Code", ""))
            if code in {"TaskTimedOut", "InvalidToken", "TaskDoesNotExist"}:
                raise TokenGone(f"{code}: {error.response.get('Error', {}).get('Message', '')}") from error
            raise

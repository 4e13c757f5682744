"""render.asl.json as AWS runs it: every callback task bounded, every subject within SNS's limit,
transient SQS errors retried, and a Distributed Map whose results cannot outgrow a state's payload.

Each check walks every state of the definition (nested Map processors included), so a state added
later is held to the same rules.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fusionfleet import layout
from fusionfleet.adapters.notify import SUBJECT_LIMIT
from fusionfleet.jobs.final_notice import (
    NOTICE_NOT_CLAIMED_ERROR,
    NOTIFIED_FAILURE_ERROR,
    NOTIFIED_INPUT_FAILURE_ERROR,
    STATE_MACHINE,
    NoticeRecord,
    state_machine_claim,
)
from fusionfleet.jobs.ids import JOB_ID_CHARS

ASL = Path(__file__).resolve().parents[2] / "infra" / "statemachine" / "render.asl.json"

# Errors Step Functions' SQS integration raises for a send that may succeed when tried again
# (throttling, a service or network fault). A bad message (too large, invalid characters, a queue
# that does not exist) is none of these and must not be retried.
TRANSIENT_SQS_ERRORS = {
    "SQS.SdkClientException",
    "SQS.AmazonSQSException",
    "SQS.SqsException",
    "SQS.KmsThrottledException",
    "SQS.RequestThrottledException",
}
# Error names that would also catch a worker's own verdict (SendTaskFailure) or a token's timeout.
CATCH_ALLS = {"States.ALL", "States.TaskFailed", "States.Timeout", "States.HeartbeatTimeout"}


# What CloudFormation substitutes on an AWS stage, where the runner below needs a value.
SUBSTITUTED = {"${Partition}": "aws", "${MergeCluster}": "fleet-cluster", "${MergeService}": "fleet-merge"}


def _definition() -> dict[str, Any]:
    """The definition as CloudFormation hands it over on an AWS stage (the substitutions the runner reads)."""
    text = ASL.read_text()
    for placeholder, value in SUBSTITUTED.items():
        text = text.replace(placeholder, value)
    return dict(json.loads(text))


def states(definition: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(name, state) of every state, nested Map and Parallel states included."""
    for name, state in definition["States"].items():
        yield name, state
        processor = state.get("ItemProcessor") or state.get("Iterator")
        if processor:
            yield from states(processor)
        for branch in state.get("Branches", []):
            yield from states(branch)


def tasks(definition: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: state for name, state in states(definition) if state["Type"] == "Task"}


def callback_tasks(definition: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: state for name, state in tasks(definition).items() if state["Resource"].endswith(".waitForTaskToken")}


def test_every_task_states_its_timeout_and_every_callback_task_its_heartbeat() -> None:
    # GIVEN every Task state of the definition
    definition = _definition()
    callbacks = callback_tasks(definition)
    assert len(callbacks) == 7  # three render priorities, three content analyses and the merge
    # WHEN their timeouts are read (a Task without one times out after 60 s on LocalStack and after
    # a year on AWS, where a lost worker would then keep a job open for a year)
    no_timeout = [n for n, s in tasks(definition).items() if not {"TimeoutSeconds", "TimeoutSecondsPath"} & set(s)]
    no_heartbeat = [n for n, s in callbacks.items() if not {"HeartbeatSeconds", "HeartbeatSecondsPath"} & set(s)]
    # THEN each states a timeout, and each callback task a heartbeat as well
    assert no_timeout == []
    assert no_heartbeat == []


_FORMAT = re.compile(r"^States\.Format\('((?:[^'\\]|\\.)*)'((?:\s*,\s*[^,)]+)*)\)$")


def longest_subject(expression: str) -> int:
    """Length of the longest subject a States.Format expression builds, with the longest job id."""
    match = _FORMAT.match(expression)
    assert match, f"subject {expression!r} is not a States.Format the test can bound"
    template, arguments = match.group(1), [a.strip() for a in match.group(2).split(",") if a.strip()]
    unbounded = [a for a in arguments if a != "$.job.job_id"]
    assert unbounded == [], f"subject {expression!r} has arguments of unknown length"
    return len(template.replace("{}", "")) + JOB_ID_CHARS * len(arguments)


def test_every_notice_subject_fits_sns_limit_with_the_longest_job_id() -> None:
    # GIVEN every SNS publish in the definition
    publishes = {n: s for n, s in tasks(_definition()).items() if s["Resource"].startswith("arn:aws:states:::sns:")}
    assert publishes
    lengths: dict[str, int] = {}
    for name, state in publishes.items():
        parameters = state["Parameters"]
        # WHEN the longest subject each can build is measured (job ids reach JOB_ID_CHARS)
        if "Subject.$" in parameters:
            lengths[name] = longest_subject(parameters["Subject.$"])
        else:
            lengths[name] = len(parameters.get("Subject", ""))
    # THEN none passes SNS's limit (AWS refuses the publish; LocalStack does not check)
    assert {n: length for n, length in lengths.items() if length > SUBJECT_LIMIT} == {}


def test_the_subject_bound_counts_what_it_should() -> None:
    # The old subject, "FusionFleet job <id> succeeded", measured 106 with an 80-character id.
    assert longest_subject("States.Format('FusionFleet job {} succeeded', $.job.job_id)") == 106
    with pytest.raises(AssertionError):
        longest_subject("States.Format('FusionFleet {} {}', $.job.job_id, $.job.manifest.target)")


def test_every_sqs_send_retries_transient_errors_and_nothing_else() -> None:
    # GIVEN every task that sends to SQS
    sends = {n: s for n, s in tasks(_definition()).items() if s["Resource"].startswith("arn:aws:states:::sqs:")}
    assert len(sends) == 9  # the three render queues, three analyses, the merge, a batch's item telling its batch twice
    for name, state in sends.items():
        # WHEN its retriers are read
        retried = {error for retrier in state.get("Retry", []) for error in retrier["ErrorEquals"]}
        # THEN a throttled or failed send is tried again, with backoff
        assert {"SQS.SdkClientException", "SQS.AmazonSQSException"} <= retried, name
        assert all(r["MaxAttempts"] >= 2 and r.get("BackoffRate", 1.0) > 1.0 for r in state["Retry"]), name
        # AND nothing else is: not a bad message, a worker's failure, or a token's timeout
        assert retried <= TRANSIENT_SQS_ERRORS, name
        assert not retried & CATCH_ALLS, name


def test_the_distributed_map_keeps_no_results() -> None:
    # GIVEN the Distributed Map of the segments
    definition = _definition()
    maps = {n: s for n, s in states(definition) if s["Type"] == "Map"}
    for name, state in maps.items():
        # WHEN its result handling is read
        processor = state["ItemProcessor"]
        ends = [s for s in processor["States"].values() if s.get("End")]
        # THEN no ResultWriter (its results are unused, and it needs multipart permissions on AWS)
        assert "ResultWriter" not in state, name
        # AND each item's output is empty, so a job of thousands of segments stays within the
        # 256 KiB a state's result may hold, and the Map's result is discarded
        assert ends and all("OutputPath" in s and s["OutputPath"] is None for s in ends), name
        assert state["ResultPath"] is None, name


# ---------------------------------------------------------------- every Catch path, run


class PathMissing(Exception):
    """A JSONPath that selects nothing: Step Functions fails the state with States.Runtime."""


CONTEXT = {
    "Task": {"Token": "token-1"},
    "Execution": {"StartTime": "2026-01-01T00:00:00Z", "Id": "arn:aws:states:us-east-1:1:execution:render:job-1"},
    "State": {"EnteredTime": "2026-01-01T00:10:00Z"},
}


def select(path: str, data: Any) -> Any:
    """A JSONPath of dotted names ($.a.b, or $$.a.b in the context object)."""
    root, rest = (CONTEXT, path[2:]) if path.startswith("$$") else (data, path[1:])
    value = root
    for name in filter(None, rest.split(".")):
        if not isinstance(value, dict) or name not in value:
            raise PathMissing(path)
        value = value[name]
    return value


def evaluate(expression: str, data: Any) -> Any:
    if expression.startswith("States.Array("):
        return [select(argument.strip(), data) for argument in expression[len("States.Array(") : -1].split(",")]
    if expression.startswith("States.JsonToString("):
        return json.dumps(select(expression[len("States.JsonToString(") : -1], data))
    if expression.startswith("States.Format("):
        match = _FORMAT.match(expression)
        assert match, expression
        text = match.group(1)
        for argument in (a.strip() for a in match.group(2).split(",") if a.strip()):
            text = text.replace("{}", str(select(argument, data)), 1)
        return text
    return select(expression, data)


def parameters(template: Any, data: Any) -> Any:
    if not isinstance(template, dict):
        return template
    resolved: dict[str, Any] = {}
    for key, value in template.items():
        if key.endswith(".$"):
            resolved[key[:-2]] = evaluate(value, data)
        else:
            resolved[key] = parameters(value, data)
    return resolved


def put(data: dict[str, Any], path: str | None, value: Any) -> dict[str, Any]:
    if path is None:
        return data
    assert path.startswith("$."), path
    head, _, rest = path[2:].partition(".")
    return {**data, head: put(dict(data.get(head) or {}), f"$.{rest}", value) if rest else value}


def holds(rule: dict[str, Any], data: Any) -> bool:
    """A Choice rule (And, Not, IsPresent, StringEquals, NumericLessThan, BooleanEquals) as Step Functions
    evaluates it."""
    if "And" in rule:
        return all(holds(r, data) for r in rule["And"])
    if "Not" in rule:
        return not holds(rule["Not"], data)
    try:
        value = select(rule["Variable"], data)
    except PathMissing:
        value = PathMissing
    if "IsPresent" in rule:
        return (value is not PathMissing) == bool(rule["IsPresent"])
    if "StringEquals" in rule:
        # On AWS a missing variable fails the state: rules test IsPresent first (And evaluates in order).
        assert value is not PathMissing, rule
        return bool(value == rule["StringEquals"])
    if "NumericLessThan" in rule:
        assert isinstance(value, int | float), rule
        return bool(value < rule["NumericLessThan"])
    if "BooleanEquals" in rule:
        assert isinstance(value, bool), rule
        return bool(value == rule["BooleanEquals"])
    raise AssertionError(f"a Choice rule the runner does not know: {rule}")


CLAIM = "arn:aws:states:::aws-sdk:s3:putObject"
TELL = "arn:aws:states:::sqs:sendMessage"


def run_until_settled(
    definition: dict[str, Any], start: str, data: dict[str, Any], records: dict[str, str] | None = None,
    visited: list[str] | None = None,
) -> tuple[str, Any]:  # fmt: skip
    """Runs Pass, Choice, SNS, S3 conditional-create and Fail states from `start` as Step Functions would,
    with JSONPath's rule that a missing path fails the state; stops at a callback task (its outcome is a
    worker's) or a Fail state. `records`: the work bucket's objects (a conditional create of one that
    exists fails, as S3's 412 does). Returns (the state it stopped at, the Fail state's cause or the
    callback's parameters)."""
    flat = dict(states(definition))
    name = start
    published: list[Any] = []
    records = {} if records is None else records
    while True:
        state = flat[name]
        kind = state["Type"]
        if visited is not None:
            visited.append(name)
        if kind == "Fail":
            cause = select(state["CausePath"], data) if "CausePath" in state else state.get("Cause")
            return name, {"cause": cause, "published": published, "error": state["Error"]}
        if kind == "Task" and state["Resource"] == CLAIM:
            request = parameters(state["Parameters"], data)
            assert request["IfNoneMatch"] == "*", name
            if request["Key"] in records:
                (catch,) = state["Catch"]
                data = put(data, catch["ResultPath"], {"Error": "S3.S3Exception", "Cause": "PreconditionFailed"})
                name = catch["Next"]
                continue
            # An object Body is written as its JSON text (a string would be stored JSON-quoted on LocalStack).
            assert isinstance(request["Body"], dict), name
            records[request["Key"]] = json.dumps(request["Body"])
            name = state["Next"]
            continue
        if kind == "Task" and state["Resource"].endswith(".waitForTaskToken"):
            return name, parameters(state["Parameters"], data)
        if kind == "Choice":
            name = next((c["Next"] for c in state["Choices"] if holds(c, data)), state["Default"])
            continue
        if kind == "Pass":
            result = parameters(state["Parameters"], data) if "Parameters" in state else state.get("Result", data)
        elif kind == "Task" and state["Resource"] == "arn:aws:states:::sns:publish":
            result = parameters(state["Parameters"], data)
            published.append(result)
        elif kind == "Task" and state["Resource"] == TELL:
            # A batch's item tells its batch it ended (TellBatchOf*): a message the runner keeps.
            result = parameters(state["Parameters"], data)
            published.append(result)
        elif kind == "Task" and state["Resource"].startswith("arn:aws:states:::aws-sdk:ecs:"):
            # The merge wake (WakeMergeService): a service with no task (its ResultSelector's shape), woken.
            parameters(state["Parameters"], data)
            result = {"desired": 0} if state["Resource"].endswith(":describeServices") else None
        else:
            raise AssertionError(f"{name}: a {kind} state the runner does not know")
        data = put(data, state.get("ResultPath", "$"), result) if state.get("ResultPath", "$") != "$" else result
        if state.get("OutputPath", "$") != "$":
            assert state["OutputPath"] is None or state.get("End"), name
        if state.get("End"):
            return name, {"published": published}
        name = state["Next"]


JOB_INPUT = {
    "job": {"job_id": "job-1", "manifest": "jobs/a.json", "submitted_at": "2026-01-01T00:00:00Z"},
    "tenant": "",
    "limits": {"merge_heartbeat_s": 600, "merge_timeout_s": 3600},
    "final_notice": state_machine_claim("job-1"),
}
# What a Catch receives (States.Timeout and States.HeartbeatTimeout sometimes come with no Cause).
FAILURES = [
    {"Error": "States.Timeout"},
    {"Error": "States.HeartbeatTimeout"},
    # LocalStack 2026.3.0 gives a timed-out task an empty Cause (seen in tests/e2e/test_pipeline.py)
    {"Error": "States.Timeout", "Cause": ""},
    {"Error": "States.TaskFailed", "Cause": "segment 3: ffmpeg exited 1"},
]


def catches(definition: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every Catch of the job's work (a lost notice claim publishes nothing by design: tested below; a
    batch's item telling its batch comes after its notice, and a lost tell goes on to the same end)."""
    return [
        (name, catch)
        for name, state in states(definition)
        if state.get("Resource") not in (CLAIM, TELL)
        for catch in state.get("Catch", [])
    ]


def test_the_runner_fails_a_state_on_a_missing_path_as_step_functions_does() -> None:
    broken = {"States": {"Notice": {"Type": "Pass", "Parameters": {"reason.$": "$.failure.Cause"}, "Next": "End"}}}
    with pytest.raises(PathMissing):
        run_until_settled(broken, "Notice", {"failure": {"Error": "States.Timeout"}})


@pytest.mark.parametrize("failure", FAILURES, ids=[f"{f['Error']}-{f.get('Cause', 'none')!r}" for f in FAILURES])
def test_every_catch_path_ends_in_a_notice_that_names_the_error_even_without_a_cause(failure: dict[str, str]) -> None:
    definition = _definition()
    found = catches(definition)
    assert {name for name, _ in found} >= {"RenderSegments", "Merge"}
    for name, catch in found:
        # GIVEN a job whose state `name` failed with this error, caught where its Catch puts it
        data = put(dict(JOB_INPUT), catch["ResultPath"], failure)
        # WHEN the states after the Catch run
        stopped, outcome = run_until_settled(definition, catch["Next"], data)
        # THEN none fails for a missing field: the job reaches a worker (the merge gate) or fails with a
        # notice that was published and a cause that names the error
        if flat_state(definition, stopped)["Type"] == "Fail":
            assert (failure.get("Cause") or failure["Error"]) in outcome["cause"], (name, outcome)
            (notice,) = outcome["published"]
            message = json.loads(notice["Message"])
            assert message["status"] == "failed" and message["error"] == failure["Error"], (name, message)
            assert message["reason"], (name, message)
            if failure.get("Cause"):
                assert message["reason"] == failure["Cause"]
        else:
            assert outcome["MessageBody"]["job"] == JOB_INPUT["job"], (name, stopped)


@pytest.mark.parametrize(
    "error,ends_as",
    [("JobRejected", NOTIFIED_INPUT_FAILURE_ERROR), ("EngineCrashed", NOTIFIED_FAILURE_ERROR),
     ("States.Timeout", NOTIFIED_FAILURE_ERROR)],
)  # fmt: skip
def test_a_failure_the_jobs_own_input_caused_ends_under_its_own_error_after_its_notice(
    error: str, ends_as: str
) -> None:
    definition = _definition()
    ended = []
    for name, catch in catches(definition):
        # GIVEN a job that failed with `error` where this Catch puts it, and nobody else holds its notice
        data = put(dict(JOB_INPUT), catch["ResultPath"], {"Error": error, "Cause": "what happened"})
        stopped, outcome = run_until_settled(definition, catch["Next"], data, {})
        if flat_state(definition, stopped)["Type"] != "Fail":
            continue  # a failed Map goes on to the merge's gate, whose own Catch is here too
        # THEN its notice is published either way, and the execution ends as JobFailed, or, for input the
        # job's own (refused by a worker or the merge), as JobFailedOnItsInput: the operators' alarm
        # (template.yaml's RenderFleetFailuresMetricFilter) counts only the first
        (notice,) = outcome["published"]
        assert json.loads(notice["Message"])["error"] == error, name
        assert outcome["error"] == ends_as, (name, outcome)
        ended.append(name)
    assert ended  # the merge's Catch at least ends the job here


def flat_state(definition: dict[str, Any], name: str) -> dict[str, Any]:
    return dict(states(definition))[name]


# ---------------------------------------------------------------- the final notice, once


MERGED = {
    "output": "outputs/a.mp4", "download_url": "http://x", "download_url_expires_at": "2026-01-02T00:00:00Z",
    "frames": 100, "duration_s": 4.0, "audio_tracks": 1, "cost": {}, "preview": None,
    "timings": {"render_s": 1, "merge_s": 1, "merge_started_at": "2026-01-01T00:09:00Z", "worker_s": 1, "engine_s": 1},
}  # fmt: skip
NOTICE_KEY = layout.notice_key("job-1")


def notice_paths() -> list[tuple[str, dict[str, Any]]]:
    """Where the state machine starts building a final notice: after the merge, and after each Catch."""
    failure = {"Error": "States.TaskFailed", "Cause": "segment 3: ffmpeg exited 1"}
    paths = [("SuccessNotice", {**JOB_INPUT, "merge": MERGED})]
    definition = _definition()
    for _name, catch in catches(definition):
        caught = put(dict(JOB_INPUT), catch["ResultPath"], failure)
        stopped, _outcome = run_until_settled(definition, catch["Next"], caught)
        if flat_state(definition, stopped).get("Resource", "").endswith(".waitForTaskToken"):
            continue  # a failed Map (or merge wake) goes on to the merge's gate, whose own Catch is here too
        paths.append((catch["Next"], caught))
    return paths


def test_every_publish_of_a_final_notice_follows_a_claim_of_the_notice_record() -> None:
    definition = _definition()
    flat = dict(states(definition))
    publishes = [name for name, state in flat.items() if state.get("Resource", "").startswith("arn:aws:states:::sns:")]
    assert publishes
    for publish in publishes:
        before = claims_before(flat, publish)
        assert before and all(flat[name].get("Resource") == CLAIM for name in before), (publish, before)
        for name in before:
            key = parameters(flat[name]["Parameters"], {**JOB_INPUT, "claim": {}})["Key"]
            assert key == NOTICE_KEY, name  # the record the watchdog and a cancel claim too


def claims_before(flat: dict[str, Any], name: str) -> list[str]:
    """The states that lead to `name`, looking through Choices (a quiet item's skips the publish)."""
    found = []
    for other, state in flat.items():
        leads = state.get("Next") == name or (
            state["Type"] == "Choice" and name in (state.get("Default"), *(c["Next"] for c in state["Choices"]))
        )
        if leads:
            found.extend(claims_before(flat, other) if state["Type"] == "Choice" else [other])
    return found


@pytest.mark.parametrize("start,data", notice_paths(), ids=[start for start, _ in notice_paths()])
def test_the_state_machine_publishes_only_a_notice_whose_record_it_created(start: str, data: dict[str, Any]) -> None:
    definition = _definition()
    # GIVEN nobody holds the job's notice record: the state machine claims it and publishes
    records: dict[str, str] = {}
    stopped, outcome = run_until_settled(definition, start, data, records)
    claim = NoticeRecord.model_validate_json(records[NOTICE_KEY])
    assert claim.by == STATE_MACHINE and claim.published is False and claim.claimed_at
    (notice,) = outcome["published"]
    message = json.loads(notice["Message"])
    status = message["status"]
    if flat_state(definition, stopped)["Type"] == "Fail":
        assert outcome["error"] == NOTIFIED_FAILURE_ERROR and status == "failed", outcome
    else:
        assert start == "SuccessNotice" and status == "succeeded", outcome
    # AND the record keeps what the notice says: the read model's reason is the notice's
    assert (claim.status, claim.error, claim.reason) == (status, message.get("error", ""), message.get("reason", ""))
    # GIVEN the watchdog (stopping the job) or a cancel created the record first
    held = {NOTICE_KEY: json.dumps({"published": False, "by": "cancel"})}
    stopped, outcome = run_until_settled(definition, start, data, held)
    # THEN the state machine publishes nothing and ends in NoticeNotClaimed, leaving the record alone
    assert flat_state(definition, stopped)["Type"] == "Fail", stopped
    assert outcome["published"] == [] and outcome["error"] == NOTICE_NOT_CLAIMED_ERROR, outcome
    assert json.loads(held[NOTICE_KEY])["by"] == "cancel"


def test_the_merge_service_is_woken_when_the_map_ends_and_only_when_it_wants_no_task() -> None:
    definition = _definition()
    # GIVEN the Map's way on, on success and on failure
    render = definition["States"]["RenderSegments"]
    assert render["Next"] == render["Catch"][0]["Next"] == "WakeMergeService"
    # WHEN it runs on an AWS stage whose merge service wants no task
    visited: list[str] = []
    stopped, sent = run_until_settled(definition, "WakeMergeService", dict(JOB_INPUT), visited=visited)
    # THEN the service is read, raised to one task, and the merge message is sent with the job
    assert visited == ["WakeMergeService", "MergeServiceToWake", "ReadMergeService", "MergeServiceIdle", "WakeMerge",
                       "Merge"]  # fmt: skip
    assert stopped == "Merge" and sent["MessageBody"]["job"] == JOB_INPUT["job"]
    wake = flat_state(definition, "WakeMerge")
    assert wake["Parameters"]["DesiredCount"] == 1 and wake["Catch"][0]["Next"] == "Merge"
    assert all(flat_state(definition, name)["TimeoutSeconds"] <= 60 for name in ("ReadMergeService", "WakeMerge"))
    # AND a service that already wants a task is left alone (the wake only raises)
    idle = flat_state(definition, "MergeServiceIdle")["Choices"][0]
    assert not holds(idle, {"wake": {"current": {"desired": 2}}}) and holds(idle, {"wake": {"current": {"desired": 0}}})
    # AND on the local stage (no ECS: the substitution is empty) the wake is skipped
    local = json.loads(ASL.read_text().replace("${Partition}", "aws").replace("${MergeCluster}", "")
                       .replace("${MergeService}", ""))  # fmt: skip
    visited = []
    assert run_until_settled(local, "WakeMergeService", dict(JOB_INPUT), visited=visited)[0] == "Merge"
    assert visited == ["WakeMergeService", "MergeServiceToWake", "Merge"]


def test_an_input_without_the_notice_claim_gets_the_modules_before_any_work() -> None:
    # GIVEN an execution started by a slicer older than the input's `final_notice` (a deployment's window)
    definition = _definition()
    old_input = {key: value for key, value in JOB_INPUT.items() if key != "final_notice"}
    flat = dict(states(definition))
    start = flat[definition["StartAt"]]
    # WHEN it starts, THEN before any work it carries exactly what the module would have put there
    assert not holds(start["Choices"][0], old_input)
    default = flat[start["Default"]]
    # (the work begins with the choice of a content analysis step before the segments)
    assert (default["ResultPath"], default["Next"]) == ("$.final_notice", "AnalyseFirst")
    assert parameters(default["Parameters"], old_input) == state_machine_claim("job-1")
    # AND an input that has it goes straight to the work
    assert holds(start["Choices"][0], JOB_INPUT) and start["Choices"][0]["Next"] == "AnalyseFirst"


ITEM_INPUT = {**JOB_INPUT, "batch": {"batch_id": "b-1", "index": 3}}


@pytest.mark.parametrize("quiet", [True, False])
@pytest.mark.parametrize("start,data", notice_paths(), ids=[start for start, _ in notice_paths()])
def test_a_batchs_item_tells_its_batch_after_its_notice_quiet_or_not(
    start: str, data: dict[str, Any], quiet: bool
) -> None:
    # GIVEN a batch's item (quiet: its notice is claimed and recorded, not published) on every way to its notice
    definition = _definition()
    item = {**data, "batch": ITEM_INPUT["batch"], "final_notice": state_machine_claim("job-1", quiet=quiet)}
    records: dict[str, str] = {}
    stopped, outcome = run_until_settled(definition, start, item, records)
    # THEN its notice record was claimed, its notice published only when not quiet, and its batch told last
    assert NOTICE_KEY in records
    *notices, tell = outcome["published"]
    assert [n["TopicArn"] for n in notices] == ([] if quiet else ["${NotificationTopicArn}"])
    assert tell == {"QueueUrl": "${IngestQueueUrl}", "MessageBody": {"batch_event": {
        "batch_id": "b-1", "job_id": "job-1", "event": "ended"}}}  # fmt: skip
    assert stopped in ("Succeeded", "JobFailed")


def test_a_job_of_its_own_tells_nobody_and_ends_with_its_notice_as_output() -> None:
    definition = _definition()
    stopped, outcome = run_until_settled(definition, "SuccessNotice", {**JOB_INPUT, "merge": MERGED}, {})
    assert stopped == "Succeeded" and [p.get("TopicArn") for p in outcome["published"]] == ["${NotificationTopicArn}"]
    assert flat_state(definition, "Succeeded")["OutputPath"] == "$.notice"

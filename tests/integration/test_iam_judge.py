"""The IAM judge denies what AWS denies: the evaluator on cases AWS documents, and a recorded call that
the stack's role does not grant, caught and named.

The evaluator is @cloud-copilot/iam-simulate (infra/iam, `make iam-env`); the cases follow AWS's "Policy
evaluation logic" and "IAM JSON policy elements" pages of the IAM User Guide, and the KMS key policy rule
of the KMS Developer Guide ("Key policies": without a key policy statement that allows the account, IAM
policies alone grant nothing on the key).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.support.iam.judge import EVALUATOR, judge, judge_folder, read_stacks
from tests.support.iam.requests import Call

ACCOUNT = "000000000000"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/caller"
BUCKET = "arn:aws:s3:::media"


def evaluate(
    policy: dict[str, Any], action: str, resource: str, context: dict[str, str] | None = None,
    resource_policy: dict[str, Any] | None = None,
) -> str:  # fmt: skip
    batch = {
        "principals": {"p": {"arn": ROLE, "policies": [{"name": "identity", "policy": policy}]}},
        "resource_policies": {"r": resource_policy} if resource_policy else {},
        "requests": [{
            "principal": "p", "action": action, "resource": resource, "account": ACCOUNT,
            "context": {"aws:SecureTransport": "true", **(context or {})},
            "resource_policy": "r" if resource_policy else None,
        }],
    }  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "batch.json"
        path.write_text(json.dumps(batch))
        done = subprocess.run(["node", str(EVALUATOR), str(path)], capture_output=True, text=True, check=True)
    return str(json.loads(done.stdout)[0]["decision"])


def allow(
    action: str | list[str], resource: str | list[str], condition: dict[str, Any] | None = None
) -> dict[str, Any]:
    statement: dict[str, Any] = {"Effect": "Allow", "Action": action, "Resource": resource}
    if condition:
        statement["Condition"] = condition
    return {"Version": "2012-10-17", "Statement": [statement]}


@pytest.fixture(autouse=True)
def evaluator_installed() -> None:
    if not (EVALUATOR.parent / "node_modules" / "@cloud-copilot" / "iam-simulate").is_dir():
        pytest.fail("the IAM evaluator is not installed: make iam-env (npm ci in infra/iam)")


def test_an_explicit_deny_in_a_bucket_policy_overrides_the_roles_allow() -> None:
    # The buckets' DenyInsecureTransport: any request over plain HTTP is refused, whatever the role allows.
    deny_http = {"Version": "2012-10-17", "Statement": [{
        "Effect": "Deny", "Principal": "*", "Action": "s3:*", "Resource": [BUCKET, f"{BUCKET}/*"],
        "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]}  # fmt: skip
    role = allow("s3:*", f"{BUCKET}/*")
    assert evaluate(role, "s3:GetObject", f"{BUCKET}/a", {"aws:SecureTransport": "false"}, deny_http) == (
        "ExplicitlyDenied"
    )
    assert evaluate(role, "s3:GetObject", f"{BUCKET}/a", {}, deny_http) == "Allowed"


def test_nothing_granted_is_denied_and_wildcards_match_across_slashes() -> None:
    role = allow("s3:PutObject", f"{BUCKET}/work/*/notice.json")
    assert evaluate(role, "s3:PutObject", f"{BUCKET}/work/job/notice.json") == "Allowed"
    # IAM's * matches any characters, slashes included (IAM User Guide, "Resource" element).
    assert evaluate(role, "s3:PutObject", f"{BUCKET}/work/a/b/notice.json") == "Allowed"
    assert evaluate(role, "s3:PutObject", f"{BUCKET}/work/job/plan.json") == "ImplicitlyDenied"
    assert evaluate(role, "s3:DeleteObject", f"{BUCKET}/work/job/notice.json") == "ImplicitlyDenied"
    # Action names are case-insensitive and take wildcards too.
    assert evaluate(allow("S3:Get*", f"{BUCKET}/*"), "s3:GetObject", f"{BUCKET}/x") == "Allowed"


def test_if_exists_conditions_pass_a_request_without_the_key_and_judge_one_with_it() -> None:
    role = allow("s3:ListBucket", BUCKET, {"StringLikeIfExists": {"s3:prefix": "tenants/*"}})
    assert evaluate(role, "s3:ListBucket", BUCKET) == "Allowed"
    assert evaluate(role, "s3:ListBucket", BUCKET, {"s3:prefix": "tenants/acme/jobs/"}) == "Allowed"
    assert evaluate(role, "s3:ListBucket", BUCKET, {"s3:prefix": "work/"}) == "ImplicitlyDenied"
    # Without IfExists a missing key fails the condition.
    strict = allow("s3:ListBucket", BUCKET, {"StringLike": {"s3:prefix": "tenants/*"}})
    assert evaluate(strict, "s3:ListBucket", BUCKET) == "ImplicitlyDenied"


def test_a_grant_on_a_resource_of_another_type_grants_nothing() -> None:
    queue = f"arn:aws:sqs:us-east-1:{ACCOUNT}:render"
    role = allow("sqs:SendMessage", queue)
    assert evaluate(role, "sqs:SendMessage", queue) == "Allowed"
    # A bucket is no resource sqs:SendMessage takes: the request is malformed, never allowed.
    assert evaluate(allow("sqs:SendMessage", "*"), "sqs:SendMessage", BUCKET) != "Allowed"


def test_a_kms_key_is_usable_only_when_its_key_policy_lets_iam_grant_it() -> None:
    key = f"arn:aws:kms:us-east-1:{ACCOUNT}:key/media"
    role = allow(["kms:Decrypt", "kms:GenerateDataKey"], key)
    delegates = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"},
                "Action": "kms:*",
                "Resource": "*",
            }
        ],
    }
    someone_else = {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:role/admin"}, "Action": "kms:*",
        "Resource": "*"}]}  # fmt: skip
    assert evaluate(role, "kms:Decrypt", key, {}, delegates) == "Allowed"
    assert evaluate(role, "kms:Decrypt", key, {}, someone_else) == "ImplicitlyDenied"


# ---------------------------------------------------------------- a recorded call the role does not grant


def _stack(folder: Path) -> dict[str, Any]:
    """A recorded local stack (as fleetctl/local/recording.py writes it) with made-up physical names."""
    endpoint = "http://127.0.0.1:4599"
    queue = f"{endpoint}/queue/us-east-1/{ACCOUNT}"
    description = {
        "stack": "fleet", "endpoint": endpoint, "region": "us-east-1", "started": 1000.0, "stopped": None,
        "resources": {
            "MediaBucket": {"type": "AWS::S3::Bucket", "physical": "fleet-mediabucket-1"},
            "WorkBucket": {"type": "AWS::S3::Bucket", "physical": "fleet-workbucket-1"},
            "NotificationTopic": {"type": "AWS::SNS::Topic", "physical": f"arn:aws:sns:us-east-1:{ACCOUNT}:topic-1"},
            "RenderStateMachine": {"type": "AWS::StepFunctions::StateMachine",
                                   "physical": f"arn:aws:states:us-east-1:{ACCOUNT}:stateMachine:fleet-render"},
            **{name: {"type": "AWS::SQS::Queue", "physical": f"{queue}/fleet-{name}-1"} for name in (
                "IngestQueue", "RenderQueueHigh", "RenderQueueNormal", "RenderQueueLow", "MergeQueue")},
        },
    }  # fmt: skip
    (folder / "stack-fleet-4599-1.json").write_text(json.dumps(description))
    return description


def _call(role: str, process: str, service: str, operation: str, **params: Any) -> Call:
    return Call(2000.0, role, process, service, operation, params, False, "us-east-1", "http://127.0.0.1:4599")


def test_a_call_the_role_does_not_grant_is_caught_naming_the_process_the_call_and_what_is_missing(
    tmp_path: Path,
) -> None:
    _stack(tmp_path)
    stacks = read_stacks(tmp_path)
    # GIVEN what the API role may do (clear markers), and a call it may not make: deleting a job's plan
    granted = _call("ApiFunctionRole", "api", "s3", "DeleteObjects", Bucket="fleet-workbucket-1",
                    Delete={"Objects": [{"Key": "work/job-1/failed.json"}]})  # fmt: skip
    refused = _call("ApiFunctionRole", "api", "s3", "DeleteObjects", Bucket="fleet-workbucket-1",
                    Delete={"Objects": [{"Key": "work/job-1/plan.json"}]})  # fmt: skip
    # WHEN both are judged
    verdict = judge([granted, refused], stacks)
    # THEN only the second is denied, and the denial says who, what, and which statement falls short
    assert verdict.calls == 2 and verdict.denied_calls == 1
    (denial,) = verdict.denials
    text = denial.describe()
    assert text.startswith("api (as ApiFunctionRole): s3:DeleteObjects(Bucket=fleet-workbucket-1)")
    assert "s3:DeleteObject on arn:aws:s3:::fleet-workbucket-1/work/job-1/plan.json: ImplicitlyDenied" in text
    assert "ClearCancelNoticeAndRunRecords on arn:aws:s3:::fleet-workbucket-1/work/*/failed.json" in text
    assert verdict.report()[-1] == "2 calls, 1 denied"


def test_the_kms_calls_s3_makes_for_the_caller_are_judged_too(tmp_path: Path) -> None:
    _stack(tmp_path)
    # The slicer reads media (decrypted with the media key on AWS) and may; it may not write outputs.
    read = _call("SlicerFunctionRole", "slicer", "s3", "GetObject", Bucket="fleet-mediabucket-1", Key="inputs/a.mp4")
    write = _call("SlicerFunctionRole", "slicer", "s3", "PutObject", Bucket="fleet-mediabucket-1", Key="outputs/a.mp4")
    verdict = judge([read, write], read_stacks(tmp_path))
    denied = {(d.request.action, d.call.operation) for d in verdict.denials}
    assert denied == {("s3:PutObject", "PutObject"), ("kms:GenerateDataKey", "PutObject")}


def test_calls_with_no_stack_or_an_unknown_role_are_never_passed(tmp_path: Path) -> None:
    _stack(tmp_path)
    elsewhere = Call(2000.0, "ApiFunctionRole", "api", "s3", "GetObject", {"Bucket": "b", "Key": "k"}, False,
                     "us-east-1", "http://127.0.0.1:1")  # fmt: skip
    stranger = _call("NoSuchRole", "x", "s3", "GetObject", Bucket="fleet-workbucket-1", Key="work/a")
    (tmp_path / "calls-x-1.jsonl").write_text("\n".join(json.dumps(c.__dict__) for c in (elsewhere, stranger)) + "\n")
    verdict = judge_folder(tmp_path)
    assert len(verdict.unjudged) == 2 and verdict.report()[-1] == "2 calls, 2 denied"


def test_a_tenants_webhook_secret_is_the_job_events_roles_only_within_its_own_stack(tmp_path: Path) -> None:
    _stack(tmp_path)
    # GIVEN the job-events function reading and making a tenant's signing secret of its own stack,
    # another stack's, and the render task reaching for one
    own = _call("JobEventsFunctionRole", "webhooks", "secretsmanager", "GetSecretValue",
                SecretId="fusionfleet/fleet/webhooks/acme")  # fmt: skip
    made = _call("JobEventsFunctionRole", "webhooks", "secretsmanager", "CreateSecret",
                 Name="fusionfleet/fleet/webhooks/_default")  # fmt: skip
    other = _call("JobEventsFunctionRole", "webhooks", "secretsmanager", "GetSecretValue",
                  SecretId="fusionfleet/other/webhooks/acme")  # fmt: skip
    worker = _call("RenderTaskRole", "render-1", "secretsmanager", "GetSecretValue",
                   SecretId="fusionfleet/fleet/webhooks/acme")  # fmt: skip
    # WHEN they are judged
    verdict = judge([own, made, other, worker], read_stacks(tmp_path))
    # THEN only the stack's own secrets, and only for the job-events role
    assert {(d.call.role, d.call.params.get("SecretId")) for d in verdict.denials} == {
        ("JobEventsFunctionRole", "fusionfleet/other/webhooks/acme"),
        ("RenderTaskRole", "fusionfleet/fleet/webhooks/acme"),
    }


def test_a_waiting_jobs_cancel_and_a_tenants_settings_are_granted_and_budget_markers_are_the_farms_own(
    tmp_path: Path,
) -> None:
    _stack(tmp_path)
    work = "fleet-workbucket-1"
    # GIVEN a tenant's API cancelling its WAITING job (the job leaves the queue), an operator's
    # `tenant set`, and an operator's tool writing a budget marker (only the farm's processes mark a cap)
    dequeue = _call(
        "ApiFunctionRole",
        "api",
        "s3",
        "DeleteObjects",
        Bucket=work,
        Delete={
            "Objects": [
                {"Key": "work/acme_a-1/waiting.json"},
                {"Key": "work/_waiting/acme/00000000000000000000001-acme_a-1.json"},
            ]
        },
    )
    settings = _call("OperatorPolicy", "cli", "s3", "PutObject", Bucket=work, Key="work/_tenants/acme/settings.json")
    marker = _call("OperatorPolicy", "cli", "s3", "PutObject", Bucket=work, Key="work/_budget/acme/2026-12-1200.json")
    # WHEN they are judged
    verdict = judge([dequeue, settings, marker], read_stacks(tmp_path))
    # THEN only the marker is denied
    assert {(d.call.process, d.request.action, d.request.resource.rsplit("/", 1)[-1]) for d in verdict.denials} == {
        ("cli", "s3:PutObject", "2026-12-1200.json")
    }


def test_a_tenants_retry_may_queue_its_run_from_the_api_and_the_cli(tmp_path: Path) -> None:
    _stack(tmp_path)
    work = "fleet-workbucket-1"
    # GIVEN a tenant's retry through the API and an operator's through the CLI: each queues the job's next
    # run for its tenant's turn (its waiting record and its index entry; the admitter starts it)
    calls = [
        _call(role, process, "s3", "PutObject", Bucket=work, Key=key)
        for role, process in (("ApiFunctionRole", "api"), ("OperatorPolicy", "cli"))
        for key in ("work/acme_a-1/waiting.json", "work/_waiting/acme/00000000000000000000001-acme_a-1.json")
    ]
    # WHEN they are judged
    verdict = judge(calls, read_stacks(tmp_path))
    # THEN every one is granted
    assert verdict.denials == [], verdict.denials

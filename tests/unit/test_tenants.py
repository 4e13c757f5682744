"""Tenants: a manifest names only its own tenant's keys, notices carry their tenant, and per-tenant limits."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fleetctl.client import Client
from fleetctl.stack import StackResources
from fleetctl.subscriptions import subscription_request
from fusionfleet import layout
from fusionfleet.adapters.notify import notice_attributes
from fusionfleet.adapters.orchestrator import Execution, execution_arn
from fusionfleet.environment.contract import from_env
from fusionfleet.environment.slicer import SlicerEnvironment
from fusionfleet.errors import FusionFleetError
from fusionfleet.fleet.tenants import TenantLimits
from fusionfleet.jobs.ids import job_id as derive_job_id
from fusionfleet.messages import JobContext
from fusionfleet.services.watchdog import Watchdog
from tests.support.fakes import FakeNotifier, FakeOrchestrator, FakeStorage
from tests.support.farm import Farm
from tests.support.jobs import job_context, watchdog_config
from tests.support.template import ROOT, load_template
from tests.support.tenants import MACHINE, MEDIA, TOPIC, WORK, drop, make_slicer, notices

ASL = ROOT / "infra" / "statemachine" / "render.asl.json"


def running(orchestrator: FakeOrchestrator, *names: str) -> None:
    for name in names:
        arn = execution_arn(MACHINE, name)
        orchestrator.states[arn] = Execution(arn, "RUNNING")


# ---------------------------------------------------------------- isolation


def test_a_manifest_naming_another_tenants_target_is_rejected_with_a_notice_to_its_own_tenant(clip: Path) -> None:
    # GIVEN tenant globex's video, and a manifest in acme's drop that names it as its target
    slicer, storage, orchestrator = make_slicer()
    storage.put_bytes(MEDIA, "tenants/globex/inputs/secret.mp4", clip.read_bytes())
    key = drop(
        storage,
        clip,
        "acme",
        {"version": 1, "source": ["tenants/acme/inputs/face.jpg"], "target": "tenants/globex/inputs/secret.mp4",
         "engine": "copy"},
    )  # fmt: skip
    before = {k: storage.get_bytes(MEDIA, k) for k in storage.list_keys(MEDIA, "")}
    storage.reads.clear()
    # WHEN the slicer handles acme's manifest
    outcome = slicer.handle(MEDIA, key)
    # THEN it is rejected, naming the key and the prefix it had to be under
    assert outcome.status == "rejected"
    assert "tenants/globex/inputs/secret.mp4" in outcome.reason and "tenants/acme/" in outcome.reason
    # AND nothing started, globex's video was never read, and every object is still in place, unchanged
    assert orchestrator.starts == []
    assert "tenants/globex/inputs/secret.mp4" not in storage.reads
    assert {k: storage.get_bytes(MEDIA, k) for k in storage.list_keys(MEDIA, "")} == before
    # AND the one notice is acme's: its body and its SNS attributes say so
    (notice,) = notices(slicer)
    assert notice["tenant"] == "acme" and notice["status"] == "failed"
    assert notice_attributes(notice)["tenant"] == "acme"


def test_a_tenant_may_not_write_its_output_outside_its_own_outputs(clip: Path) -> None:
    # GIVEN an acme manifest whose output is in globex's outputs
    slicer, storage, orchestrator = make_slicer()
    manifest = {"version": 1, "source": ["tenants/acme/inputs/face.jpg"], "target": "tenants/acme/inputs/clip.mp4",
                "output": "tenants/globex/outputs/clip.mp4"}  # fmt: skip
    key = drop(storage, clip, "acme", manifest)
    # WHEN it is handled
    outcome = slicer.handle(MEDIA, key)
    # THEN it is refused and nothing starts
    assert outcome.status == "rejected" and "tenants/acme/outputs/" in outcome.reason
    assert orchestrator.starts == []


def test_a_tenant_job_carries_its_tenant_to_the_workers_and_the_notices(clip: Path) -> None:
    # GIVEN an acme manifest naming acme's own media
    slicer, storage, orchestrator = make_slicer(TenantLimits(max_running_jobs=4, max_segments=8))
    key = drop(storage, clip, "acme")
    # WHEN it is handled
    outcome = slicer.handle(MEDIA, key)
    # THEN it starts as an acme job whose output goes to acme's outputs
    assert outcome.status == "started" and outcome.job_id.startswith("acme_")
    payload = orchestrator.executions[outcome.execution_arn]
    context = JobContext.model_validate(payload["job"])
    assert context.tenant == "acme" and context.output.key == "tenants/acme/outputs/clip.mp4"
    # AND the state machine's notices get the tenant attribute from the input, and its segment share
    assert payload["tenant"] == "acme"
    assert payload["limits"]["render_concurrency"] == 2


def test_a_single_tenant_drop_is_unchanged_by_tenant_limits(clip: Path) -> None:
    # GIVEN tight tenant limits, tenant jobs running, and a plain jobs/ manifest
    slicer, storage, orchestrator = make_slicer(TenantLimits(max_running_jobs=1, max_segments=1))
    running(orchestrator, "acme_a-0123456789abcdef")
    key = drop(storage, clip, None)
    # WHEN it is handled
    outcome = slicer.handle(MEDIA, key)
    # THEN it starts with the stack's concurrency, and its notices are marked "-" (no tenant)
    assert outcome.status == "started"
    payload = orchestrator.executions[outcome.execution_arn]
    assert JobContext.model_validate(payload["job"]).tenant is None
    assert payload["tenant"] == "-" and payload["limits"]["render_concurrency"] == 1000


# ---------------------------------------------------------------- limits


def test_a_tenant_at_its_job_limit_is_refused_with_a_notice_naming_the_limit_while_others_start(clip: Path) -> None:
    # GIVEN acme running two jobs (one a retry) of the two it may run, and globex running one
    slicer, storage, orchestrator = make_slicer(TenantLimits(max_running_jobs=2, max_segments=0))
    running(orchestrator, "acme_a-0123456789abcdef", "acme_b-0123456789abcdef--r1", "globex_c-0123456789abcdef")
    acme_key = drop(storage, clip, "acme")
    globex_key = drop(storage, clip, "globex")
    storage.reads.clear()
    # WHEN a third acme job and a second globex job arrive
    refused = slicer.handle(MEDIA, acme_key)
    started = slicer.handle(MEDIA, globex_key)
    # THEN acme's is refused before its media is read, saying which limit and what to do
    assert refused.status == "rejected"
    assert "tenant acme is running 2 jobs" in refused.reason and "TenantMaxRunningJobs" in refused.reason
    assert "upload the manifest again" in refused.reason
    assert "tenants/acme/inputs/clip.mp4" not in storage.reads
    # AND acme is told, and only acme
    (notice,) = notices(slicer)
    assert notice["tenant"] == "acme" and notice["job_id"] == refused.job_id
    # AND globex's job starts
    assert started.status == "started"
    assert orchestrator.starts == [started.execution_arn]


def test_the_segment_share_never_exceeds_the_stacks_per_job_concurrency() -> None:
    limits = TenantLimits(max_running_jobs=2, max_segments=64)
    assert limits.render_concurrency(1000) == 32
    assert limits.render_concurrency(16) == 16
    assert TenantLimits().render_concurrency(16) == 16


@pytest.mark.parametrize(
    ("jobs", "segments", "message"),
    [(0, 10, "needs a tenant job limit"), (8, 4, "below the tenant job limit"), (-1, 0, "negative")],
)
def test_limits_that_cannot_hold_are_refused(jobs: int, segments: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TenantLimits(max_running_jobs=jobs, max_segments=segments)


def test_the_slicer_reads_tenant_limits_from_its_environment() -> None:
    base = {
        "AWS_REGION": "us-east-1",
        "WORK_BUCKET": WORK,
        "STATE_MACHINE_ARN": MACHINE,
        "NOTIFICATION_TOPIC_ARN": TOPIC,
    }
    config = from_env(SlicerEnvironment, {**base, "TENANT_MAX_RUNNING_JOBS": "3", "TENANT_MAX_SEGMENTS": "30"})
    assert config.tenants == TenantLimits(3, 30)
    assert from_env(SlicerEnvironment, base).tenants == TenantLimits()
    with pytest.raises(ValueError, match="needs a tenant job limit"):
        from_env(SlicerEnvironment, {**base, "TENANT_MAX_SEGMENTS": "30"})


# ---------------------------------------------------------------- notices and subscriptions


@pytest.mark.parametrize(
    ("message", "tenant"),
    [
        ({"status": "failed", "job_id": "acme_clip-0123456789abcdef", "tenant": "acme"}, "acme"),
        ({"status": "cancelled", "job_id": "acme_clip-0123456789abcdef"}, "acme"),  # from the job id
        ({"status": "succeeded", "job_id": "clip-0123456789abcdef"}, "-"),
        ({"status": "failed"}, "-"),
    ],
)
def test_every_notice_has_a_tenant_attribute_sns_accepts(message: dict[str, object], tenant: str) -> None:
    attributes = notice_attributes(message)
    assert attributes["tenant"] == tenant and all(attributes.values())


def test_a_tenant_subscription_filters_on_the_tenant_attribute() -> None:
    request = subscription_request(TOPIC, "acme", "sqs", "arn:aws:sqs:us-east-1:1:inbox")
    assert request["Protocol"] == "sqs" and request["Endpoint"] == "arn:aws:sqs:us-east-1:1:inbox"
    attributes = request["Attributes"]
    assert isinstance(attributes, dict)
    assert json.loads(attributes["FilterPolicy"]) == {"tenant": ["acme"]}
    assert attributes["FilterPolicyScope"] == "MessageAttributes"


@pytest.mark.parametrize(
    ("tenant", "protocol", "endpoint", "message"),
    [
        ("Acme Corp", "email", "a@example.com", "is not a tenant name"),
        ("acme", "https", "http://example.com/hook", "is not an https:// URL"),
        ("acme", "sqs", "https://sqs.example/queue", "is not a queue ARN"),
        ("acme", "sms", "+100", "unknown protocol"),
    ],
)
def test_a_bad_subscription_is_refused_saying_what_is_wrong(
    tenant: str, protocol: str, endpoint: str, message: str
) -> None:
    with pytest.raises(FusionFleetError, match=message):
        subscription_request(TOPIC, tenant, protocol, endpoint)


# ---------------------------------------------------------------- the client


def resources() -> StackResources:
    return StackResources("local", MEDIA, WORK, "q", "q", ("h", "n", "l"), "q", "q", "q", TOPIC, MACHINE)


def test_submit_as_a_tenant_puts_everything_under_the_tenants_prefix(tmp_path: Path) -> None:
    # GIVEN a face and a target on disk
    face, target = tmp_path / "face.jpg", tmp_path / "talk.mp4"
    face.write_bytes(b"face")
    target.write_bytes(b"video")
    storage = FakeStorage()
    client = Client(storage, FakeOrchestrator(), resources())
    # WHEN they are submitted as tenant acme
    submission = client.submit([face], target, name="talk", tenant="acme")
    # THEN media, manifest and output are all acme's, and the job id is acme's
    assert storage.list_keys(MEDIA, "") == [
        "tenants/acme/inputs/talk/source-0.jpg", "tenants/acme/inputs/talk/target.mp4", "tenants/acme/jobs/talk.json",
    ]  # fmt: skip
    assert submission.output_key == "tenants/acme/outputs/talk.mp4"
    # AND the inputs carry the retention tag the lifecycle rule expires tenants' uploads by
    retention = dict([layout.INPUT_RETENTION_TAG])
    inputs = ["tenants/acme/inputs/talk/source-0.jpg", "tenants/acme/inputs/talk/target.mp4"]
    assert storage.tags == {(MEDIA, key): retention for key in inputs}
    manifest = storage.json(MEDIA, "tenants/acme/jobs/talk.json")
    assert manifest["output"] == submission.output_key
    assert submission.job_id.startswith("acme_") and submission.job_id == derive_job_id(
        MEDIA, "tenants/acme/jobs/talk.json", storage.head(MEDIA, "tenants/acme/jobs/talk.json").etag
    )


def test_submit_refuses_a_bad_tenant_name_before_uploading_anything(tmp_path: Path) -> None:
    target = tmp_path / "talk.mp4"
    target.write_bytes(b"video")
    storage = FakeStorage()
    with pytest.raises(FusionFleetError, match="is not a tenant name"):
        Client(storage, FakeOrchestrator(), resources()).submit([target], target, tenant="../globex")
    assert storage.list_keys(MEDIA, "") == []


# ---------------------------------------------------------------- the wiring


def test_tenant_manifests_reach_the_ingest_queue_as_plain_drops_do() -> None:
    # GIVEN the media bucket's notifications in the template
    bucket = load_template()["Resources"]["MediaBucket"]["Properties"]
    rules = [
        ({rule["Name"]: rule["Value"] for rule in config["Filter"]["S3Key"]["Rules"]}, config)
        for config in bucket["NotificationConfiguration"]["QueueConfigurations"]
    ]
    # THEN both drops send every created .json under them to the ingest queue
    by_prefix = {filters["prefix"]: (filters["suffix"], config) for filters, config in rules}
    assert set(by_prefix) == {"jobs/", "tenants/"}
    for suffix, config in by_prefix.values():
        assert suffix == ".json" and config["Event"] == "s3:ObjectCreated:*"
        assert config["Queue"] == {"Fn::GetAtt": ["IngestQueue", "Arn"]}
    # AND the slicer ignores what is under tenants/ but no manifest, without reading it
    slicer, storage, orchestrator = make_slicer()
    storage.put_bytes(MEDIA, "tenants/acme/inputs/settings.json", b"{}")
    assert slicer.handle(MEDIA, "tenants/acme/inputs/settings.json").status == "ignored"
    assert storage.reads == {} and orchestrator.starts == []


def test_every_notice_the_state_machine_publishes_carries_the_tenant_from_the_execution_input(clip: Path) -> None:
    # GIVEN the state machine's publish tasks
    definition = json.loads(ASL.read_text())
    publishes = [
        state
        for state in definition["States"].values()
        if state.get("Resource") == "arn:${Partition}:states:::sns:publish"
    ]
    # THEN each one sets the tenant attribute from $.tenant
    assert len(publishes) == 2
    for publish in publishes:
        assert publish["Parameters"]["MessageAttributes"]["tenant"] == {
            "DataType": "String",
            "StringValue.$": "$.tenant",
        }
    # AND the slicer's execution input has it, for tenant and single-tenant jobs alike
    slicer, storage, orchestrator = make_slicer()
    for tenant in ("acme", None):
        outcome = slicer.handle(MEDIA, drop(storage, clip, tenant))
        assert isinstance(orchestrator.executions[outcome.execution_arn]["tenant"], str)


def test_list_keeps_to_one_tenants_jobs_and_its_limit_counts_only_them() -> None:
    # GIVEN jobs of acme, of globex and of the plain jobs/ drop
    farm = Farm()
    farm.job("acme_a-0123456789abcdef", "SUCCEEDED", minutes_ago=30)
    farm.job("globex_b-0123456789abcdef", "RUNNING", minutes_ago=20)
    farm.job("acme_c-0123456789abcdef", "RUNNING", minutes_ago=10)
    farm.job("plain-0123456789abcdef", "RUNNING", minutes_ago=5)
    # WHEN each tenant's jobs are listed
    ids = {tenant: [job.job_id for job in farm.reader.list_jobs(tenant=tenant)] for tenant in ("acme", "globex", "-")}
    # THEN each sees only its own, newest first, and the limit counts only those
    assert ids == {
        "acme": ["acme_c-0123456789abcdef", "acme_a-0123456789abcdef"],
        "globex": ["globex_b-0123456789abcdef"],
        "-": ["plain-0123456789abcdef"],
    }
    assert [job.job_id for job in farm.reader.list_jobs(limit=1, tenant="acme")] == ["acme_c-0123456789abcdef"]


def test_a_manifest_under_a_name_that_is_no_tenant_is_refused_not_ignored() -> None:
    # GIVEN a manifest dropped under tenants/Acme Corp/jobs/ (capitals and a space: no tenant name)
    slicer, storage, orchestrator = make_slicer()
    key = "tenants/Acme Corp/jobs/clip.json"
    storage.put_bytes(MEDIA, key, b'{"version": 1}')
    # WHEN it is handled
    outcome = slicer.handle(MEDIA, key)
    # THEN it is rejected with a notice saying what a tenant name is, and nothing was read or started
    assert outcome.status == "rejected" and "'Acme Corp'" in outcome.reason and "is not a tenant name" in outcome.reason
    assert storage.reads == {} and orchestrator.starts == []
    (notice,) = notices(slicer)
    assert notice["tenant"] == "-" and storage.exists(MEDIA, key)
    # AND other .json files under tenants/ are still ignored
    assert slicer.handle(MEDIA, "tenants/Acme Corp/inputs/a.json").status == "ignored"


def test_the_watchdogs_own_notice_is_marked_with_the_jobs_tenant() -> None:
    # GIVEN an acme job whose execution timed out without a notice
    job = "acme_clip-0123456789abcdef"
    storage, orchestrator, notifier = FakeStorage(), FakeOrchestrator(), FakeNotifier()
    storage.put_json(WORK, layout.job_key(job), job_context(job, tenant="acme").model_dump(mode="json"))
    arn = execution_arn(MACHINE, job)
    now = datetime.now(UTC)
    orchestrator.states[arn] = Execution(arn, "TIMED_OUT", now - timedelta(hours=1), now - timedelta(seconds=5))
    config = watchdog_config(WORK, MACHINE, TOPIC, stall_s=600, dispatch_grace_s=120)
    # WHEN the watchdog closes it
    Watchdog(storage, orchestrator, notifier, config).sweep(now)
    # THEN its failure notice is acme's
    ((_topic, _subject, notice),) = notifier.published
    assert notice["status"] == "failed" and notice["tenant"] == "acme"
    assert notice_attributes(notice)["tenant"] == "acme"

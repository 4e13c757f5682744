"""A cold render fleet is raised the moment a job starts (fusionfleet/fleet/wake.py), not when queue metrics notice."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

from fusionfleet.environment.contract import from_env
from fusionfleet.environment.slicer import SlicerEnvironment
from fusionfleet.fleet.wake import EcsServiceWaker, NoWaker, WakePolicy, raised_count
from fusionfleet.services.slicing import Slicer
from tests.support.fakes import FakeNotifier, FakeOrchestrator, FakeStorage, FakeWaker
from tests.support.jobs import slicer_config
from tests.support.media import write_video
from tests.support.tenants import MACHINE, MEDIA, TOPIC, WORK, drop

CLUSTER, SERVICE = "fleet-cluster", "fleet-render"
POLICY = WakePolicy(max_tasks=4, backlog_per_task=2)


@pytest.mark.parametrize(
    ("desired", "segments", "raised"),
    [
        (0, 1, 1),  # a cold fleet gets its first host at once
        (0, 3, 2),  # as many as target tracking would want: ceil(3 / 2)
        (0, 100, 4),  # never past the fleet's maximum
        (1, 3, 2),  # below need: raised
        (2, 3, None),  # enough already: untouched
        (4, 100, None),  # at the maximum
        (3, 1, None),  # never lowered: scaling in is target tracking's
        (0, 0, None),  # nothing to render
    ],
)
def test_the_count_is_raised_to_the_jobs_need_and_never_lowered(
    desired: int, segments: int, raised: int | None
) -> None:
    assert raised_count(desired, segments, POLICY) == raised


def test_a_policy_without_room_is_refused() -> None:
    with pytest.raises(ValueError, match="max_tasks"):
        WakePolicy(max_tasks=0)


def _ecs() -> tuple[object, Stubber]:
    client = boto3.client("ecs", region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s")
    return client, Stubber(client)


def _described(desired: int) -> dict[str, object]:
    return {"services": [{"serviceName": SERVICE, "desiredCount": desired}], "failures": []}


def test_a_cold_service_is_raised_through_update_service() -> None:
    # GIVEN a render service that wants no task
    client, stub = _ecs()
    stub.add_response("describe_services", _described(0), {"cluster": CLUSTER, "services": [SERVICE]})
    # THEN the waker asks for what a three-segment job needs
    stub.add_response("update_service", {}, {"cluster": CLUSTER, "service": SERVICE, "desiredCount": 2})
    with stub:
        EcsServiceWaker(client, CLUSTER, SERVICE, POLICY).wake(3)
        stub.assert_no_pending_responses()


def test_a_service_with_enough_tasks_is_left_alone() -> None:
    client, stub = _ecs()
    stub.add_response("describe_services", _described(3), {"cluster": CLUSTER, "services": [SERVICE]})
    with stub:  # no update_service stubbed: a call would fail the test
        EcsServiceWaker(client, CLUSTER, SERVICE, POLICY).wake(3)
        stub.assert_no_pending_responses()


def test_a_refused_raise_is_logged_and_never_fails_the_job(caplog: pytest.LogCaptureFixture) -> None:
    # GIVEN ECS that denies the update (a missing grant, a throttle)
    client, stub = _ecs()
    stub.add_response("describe_services", _described(0), {"cluster": CLUSTER, "services": [SERVICE]})
    stub.add_client_error("update_service", service_error_code="AccessDeniedException", http_status_code=400)
    with stub:
        # WHEN the waker runs THEN it does not raise, and says why the fleet was not raised
        EcsServiceWaker(client, CLUSTER, SERVICE, POLICY).wake(1)
    assert "not raised" in caplog.text and "AccessDenied" in caplog.text


def test_the_local_waker_does_nothing() -> None:
    NoWaker().wake(10)  # no client, no call: nothing to raise


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_video(tmp_path_factory.mktemp("wake") / "clip.mp4", seconds=3, fps=25, width=160, height=120)


def test_the_slicer_wakes_the_fleet_for_a_started_job_and_not_for_a_duplicate(clip: Path) -> None:
    # GIVEN a slicer with a waker, and a manifest
    storage, waker = FakeStorage(), FakeWaker()
    slicer = Slicer(storage, FakeOrchestrator(), FakeNotifier(), slicer_config(WORK, MACHINE, TOPIC), waker=waker)
    key = drop(storage, clip, None)
    # WHEN the job starts
    outcome = slicer.handle(MEDIA, key)
    assert outcome.status == "started", outcome.reason
    # THEN the fleet is woken once, for the job's segments
    (segments,) = waker.woken
    assert segments >= 1
    # AND the same event again (a duplicate) wakes nothing more
    assert slicer.handle(MEDIA, key).status == "duplicate"
    assert waker.woken == [segments]


def test_the_slicer_wakes_only_where_a_render_service_is_named() -> None:
    base = {"AWS_REGION": "us-east-1", "WORK_BUCKET": WORK, "STATE_MACHINE_ARN": MACHINE, "FLEET_MAX_WORKERS": "4"}
    base["NOTIFICATION_TOPIC_ARN"] = TOPIC
    assert from_env(SlicerEnvironment, base).wake is None  # the local stack
    named = {**base, "RENDER_CLUSTER": CLUSTER, "RENDER_SERVICE": SERVICE, "RENDER_BACKLOG_PER_TASK": "2"}
    assert from_env(SlicerEnvironment, named).wake == WakePolicy(4, 2.0)
    assert from_env(SlicerEnvironment, {**named, "FLEET_MAX_WORKERS": "0"}).wake is None

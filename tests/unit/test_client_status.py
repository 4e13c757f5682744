"""`fusionfleet status` of a finished job signs a fresh download link rather than repeating the notice's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fleetctl.client import Client
from fleetctl.submit_commands import _describe
from fusionfleet import layout
from fusionfleet.adapters.links import DOWNLOAD_LINK_SECONDS
from fusionfleet.adapters.orchestrator import Execution, execution_arn
from fusionfleet.adapters.storage import put_json
from fusionfleet.facefusion.content_analysis import AnalysisProgress
from fusionfleet.messages import ObjectRef
from tests.support.fakes import FakeOrchestrator, FakeStorage
from tests.support.farm import MACHINE, RESOURCES
from tests.support.jobs import job_context


def test_a_succeeded_job_gets_a_freshly_signed_link_for_its_output() -> None:
    # GIVEN a job that succeeded days ago: its notice's link ended long since
    orchestrator = FakeOrchestrator()
    arn = execution_arn(MACHINE, "clip-1")
    ended = datetime.now(UTC) - timedelta(days=3)
    orchestrator.states[arn] = Execution(
        arn, "SUCCEEDED", ended - timedelta(minutes=5), ended,
        output={
            "output": {"bucket": "media", "key": "outputs/clip.mp4", "uri": "s3://media/outputs/clip.mp4"},
            "download_url": "https://stale.example/outputs/clip.mp4",
            "download_url_expires_at": (ended + timedelta(hours=6)).isoformat(),
        },
    )  # fmt: skip
    client = Client(FakeStorage(), orchestrator, RESOURCES)
    # WHEN its status is read
    status = client.status("clip-1")
    # THEN it carries a link to the output signed now, for a day
    assert status.state == "SUCCEEDED" and status.download is not None
    assert status.download.url == f"https://media.fake/outputs/clip.mp4?expires={DOWNLOAD_LINK_SECONDS}&download=1"
    assert status.download.expires_at > datetime.now(UTC) + timedelta(hours=23)


def test_a_running_job_has_no_link() -> None:
    orchestrator = FakeOrchestrator()
    arn = execution_arn(MACHINE, "clip-2")
    orchestrator.states[arn] = Execution(arn, "RUNNING", datetime.now(UTC), None)
    assert Client(FakeStorage(), orchestrator, RESOURCES).status("clip-2").download is None


def test_a_job_analysing_its_target_says_how_far_it_has_read() -> None:
    # GIVEN a FaceFusion job whose content analysis (its step before the segments) has read a third
    storage, orchestrator = FakeStorage(), FakeOrchestrator()
    job = job_context("clip-3", frame_count=900, engine="facefusion",
                      content_analysis=ObjectRef(bucket="work", key=layout.content_analysis_key("clip-3")))  # fmt: skip
    put_json(storage, "work", layout.job_key("clip-3"), job.model_dump(mode="json"))
    progress = AnalysisProgress(frames_read=300, frame_count=900, sampled=12, worker="w-1")
    put_json(storage, "work", layout.content_analysis_progress_key("clip-3"), progress.model_dump())
    arn = execution_arn(MACHINE, "clip-3")
    orchestrator.states[arn] = Execution(arn, "RUNNING", datetime.now(UTC), None)
    # WHEN its status is read THEN it says so (no segment has been sent yet: no Map Run)
    status = Client(storage, orchestrator, RESOURCES).status("clip-3")
    assert not status.segments.done and status.analysis == progress
    assert "content analysis" in _describe(status) and "33 %" in _describe(status)

"""A job or batch exists from the moment its manifest is accepted: PENDING until the slicer takes it, never
"not found" (issue 43: `submit --wait` read a batch before the slicer had written its record). An id no
manifest was accepted for stays unknown."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from fleetctl.batch_client import BatchClient
from fleetctl.client import Client, Submission
from fusionfleet import layout
from fusionfleet.adapters.storage import put_json
from fusionfleet.errors import JobNotFound
from fusionfleet.jobs.batch_reader import BatchReader
from fusionfleet.jobs.reader import JobReader
from fusionfleet.jobs.states import JobState
from tests.support.fakes import FakeOrchestrator, FakeStorage
from tests.support.farm import MACHINE, RESOURCES
from tests.support.jobs import job_context
from tests.unit.test_api_jobs import JPEG_HEAD
from tests.unit.test_api_jobs import Farm as ApiFarm

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 64


def files(folder: Path, *names: str) -> list[Path]:
    made = []
    for name in names:
        path = folder / name
        path.write_bytes(PNG if name.endswith(".png") else JPEG if name.endswith(".jpg") else b"\x00" * 64)
        made.append(path)
    return made


@pytest.fixture
def farm() -> tuple[FakeStorage, FakeOrchestrator]:
    return FakeStorage(), FakeOrchestrator()


def reader(storage: FakeStorage, orchestrator: FakeOrchestrator) -> JobReader:
    return JobReader(storage, orchestrator, "work", MACHINE)


def submitted(farm: tuple[FakeStorage, FakeOrchestrator], folder: Path, **options: Any) -> Submission:
    """A job named talk, of a face and a clip, submitted through the CLI's client (its manifest in the bucket)."""
    face, clip = files(folder, "face.jpg", "clip.mp4")
    return Client(*farm, RESOURCES).submit([face], clip, name="talk", **options)


def test_a_job_submitted_and_not_yet_sliced_reads_pending_with_what_its_manifest_says(
    farm: tuple[FakeStorage, FakeOrchestrator], tmp_path: Path
) -> None:
    storage, orchestrator = farm
    # GIVEN a job submitted through the CLI, its manifest in the bucket, no slicer record yet
    submission = submitted(farm, tmp_path, priority="high")
    assert not storage.exists("work", layout.job_key(submission.job_id))
    # WHEN its status is read, and the farm's jobs are listed
    view = Client(storage, orchestrator, RESOURCES).status(submission.job_id)
    listed = reader(storage, orchestrator).list_jobs()
    # THEN it is PENDING with its name, target and priority, not unknown, and listed as such
    assert view.state is JobState.PENDING and not view.ended
    assert (view.name, view.targets, view.priority) == ("talk", ("inputs/talk/target.mp4",), "high")
    assert [(job.job_id, job.state) for job in listed] == [(submission.job_id, JobState.PENDING)]
    # AND the dashboard's detail of it is PENDING too
    assert reader(storage, orchestrator).detail(submission.job_id).job.state is JobState.PENDING


def test_the_slicers_record_takes_over_from_the_acceptance(
    farm: tuple[FakeStorage, FakeOrchestrator], tmp_path: Path
) -> None:
    storage, orchestrator = farm
    submission = submitted(farm, tmp_path)
    # GIVEN the slicer has taken it: its job record written, its execution started
    put_json(storage, "work", layout.job_key(submission.job_id), job_context(submission.job_id).model_dump(mode="json"))
    orchestrator.start(MACHINE, submission.job_id, {})
    # THEN it reads as the slicer's record says (RUNNING, its segments), listed once
    view = Client(storage, orchestrator, RESOURCES).status(submission.job_id)
    assert view.state is JobState.RUNNING and view.segments.total == 2
    assert [job.job_id for job in reader(storage, orchestrator).list_jobs()] == [submission.job_id]


def test_an_unknown_id_is_not_found(farm: tuple[FakeStorage, FakeOrchestrator]) -> None:
    storage, orchestrator = farm
    # GIVEN no manifest was accepted for an id, and nothing the slicer writes exists for it
    with pytest.raises(JobNotFound):
        Client(storage, orchestrator, RESOURCES).status("nobody-0123456789abcdef")
    with pytest.raises(JobNotFound):
        BatchReader(reader(storage, orchestrator)).detail("nobody-0123456789abc")
    with pytest.raises(JobNotFound):
        reader(storage, orchestrator).detail("nobody-0123456789abcdef")
    assert not BatchReader(reader(storage, orchestrator)).is_batch("nobody-0123456789abc")


def test_an_accepted_job_whose_manifest_is_gone_is_not_found(
    farm: tuple[FakeStorage, FakeOrchestrator], tmp_path: Path
) -> None:
    storage, orchestrator = farm
    submission = submitted(farm, tmp_path)
    # GIVEN its manifest deleted before the slicer took it (the slicer ignores a manifest that is gone)
    storage.delete_prefix("media", submission.manifest_key)
    # THEN the id names nothing that will ever run
    with pytest.raises(JobNotFound):
        Client(storage, orchestrator, RESOURCES).status(submission.job_id)


def test_a_batch_submitted_and_not_yet_opened_reads_pending_with_its_items(
    farm: tuple[FakeStorage, FakeOrchestrator], tmp_path: Path
) -> None:
    storage, orchestrator = farm
    face, *targets = files(tmp_path, "face.jpg", "a.jpg", "b.png", "clip.mp4")
    client = BatchClient(storage, orchestrator, "media", "work", MACHINE)
    # GIVEN a batch of three targets submitted, no batch record yet (the slicer has not opened it)
    submission = client.submit([face], targets, name="mixed")
    assert not storage.exists("work", f"work/{submission.batch_id}/batch.json")
    # WHEN its detail is read (what `submit --wait` and `status` do), and the farm's jobs are listed
    detail = client.detail(submission.batch_id)
    listed = reader(storage, orchestrator).list_jobs()
    # THEN it is a PENDING batch whose three items, its targets, have not started
    assert detail.batch.state is JobState.PENDING and detail.batch.kind == "batch" and not detail.batch.ended
    assert (detail.batch.name, detail.batch.priority, detail.batch.items.total) == ("mixed", "normal", 3)
    assert [(item.index, item.target, item.state) for item in detail.items] == [
        (0, "inputs/mixed/targets/a.jpg", JobState.PENDING),
        (1, "inputs/mixed/targets/b.png", JobState.PENDING),
        (2, "inputs/mixed/targets/clip.mp4", JobState.PENDING),
    ]
    assert [(row.job_id, row.kind, row.state) for row in listed] == [(submission.batch_id, "batch", JobState.PENDING)]
    # AND `status` knows it for a batch, and its items for its items, PENDING with their targets
    assert BatchReader(reader(storage, orchestrator)).is_batch(submission.batch_id)
    item = Client(storage, orchestrator, RESOURCES).status(detail.items[1].job_id)
    assert (item.state, item.targets) == (JobState.PENDING, ("inputs/mixed/targets/b.png",))
    with pytest.raises(JobNotFound):
        Client(storage, orchestrator, RESOURCES).status(f"{submission.batch_id}.0003")  # no fourth item


def test_a_batch_the_slicer_refused_reads_rejected_not_pending(
    farm: tuple[FakeStorage, FakeOrchestrator], tmp_path: Path
) -> None:
    storage, orchestrator = farm
    face, *targets = files(tmp_path, "face.jpg", "a.jpg", "b.png")
    client = BatchClient(storage, orchestrator, "media", "work", MACHINE)
    submission = client.submit([face], targets, name="refused")
    # GIVEN the slicer refused it (its rejection, under the batch's id)
    put_json(storage, "work", layout.rejection_key(submission.batch_id), {"reason": "targets[1]: not there"})
    # THEN its detail has ended REJECTED with the reason, so a wait stops
    detail = client.detail(submission.batch_id)
    assert detail.batch.state is JobState.REJECTED and detail.batch.ended and detail.batch.kind == "batch"
    assert detail.batch.reason == "targets[1]: not there"


def test_the_tenant_api_shows_a_started_batch_not_yet_opened_as_pending_with_its_items() -> None:
    farm = ApiFarm()
    body = {"source": "face.jpg", "targets": ["a.jpg", "b.png", "clip.mp4"], "priority": "high"}
    created = farm.call("POST", "/jobs", body).body
    for upload in created["uploads"]:
        farm.storage.put_bytes("media", upload["key"], JPEG_HEAD if upload["name"] == "face.jpg" else b"media")
    api_id = created["job_id"]
    # GIVEN the batch started (its manifest written) and the slicer has not opened it
    assert farm.call("POST", f"/jobs/{api_id}/start").status == 202
    # WHEN its status and detail are read
    shown = farm.call("GET", f"/jobs/{api_id}").body
    detail = farm.call("GET", f"/jobs/{api_id}/detail").body
    # THEN it is a PENDING batch with its priority and targets, and its three items not started
    assert (shown["state"], shown["kind"], shown["priority"]) == ("PENDING", "batch", "high")
    assert shown["targets"] == ["a.jpg", "b.png", "clip.mp4"] and shown["items"]["total"] == 3
    assert [(item["index"], item["target"], item["state"]) for item in detail["items"]] == [
        (0, "a.jpg", "PENDING"), (1, "b.png", "PENDING"), (2, "clip.mp4", "PENDING"),
    ]  # fmt: skip
    # AND an id the tenant never had is still 404
    assert farm.call("GET", "/jobs/20260101-000000-00000000").status == 404


class RefusingAcceptance(FakeStorage):
    """A stack whose OperatorPolicy predates the acceptance record: S3 refuses that one write."""

    def put_bytes(self, bucket: str, key: str, data: bytes, content_type: str = "application/octet-stream") -> str:
        if key.endswith("/accepted.json"):
            raise ClientError({"Error": {"Code": "AccessDenied", "Message": "denied"}}, "PutObject")
        return super().put_bytes(bucket, key, data, content_type)


def test_a_stack_that_refuses_the_record_still_runs_the_job_and_says_why_it_reads_unknown(tmp_path: Path) -> None:
    storage = RefusingAcceptance()
    face, clip = files(tmp_path, "face.jpg", "clip.mp4")
    said: list[str] = []
    submission = Client(storage, FakeOrchestrator(), RESOURCES).submit([face], clip, name="talk", say=said.append)
    assert storage.exists("media", submission.manifest_key)  # the trigger was written: the job will run
    assert any("could not record" in line and "AccessDenied" in line for line in said), said

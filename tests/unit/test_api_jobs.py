"""The API's view of a running pipeline: states, segment counts, the download link and cancel.

The pipeline is played by the in-memory fakes: once the API has written a tenant's manifest, the test
writes what the slicer would (the job record under the job id derived from the manifest object) and
sets the execution's state, then reads it back through the API's routes.
"""

from __future__ import annotations

import json

from fusionfleet import layout
from fusionfleet.adapters.orchestrator import Execution, execution_arn
from fusionfleet.jobs import summary
from fusionfleet.jobs.ids import job_id as pipeline_job_id
from fusionfleet.jobs.ids import name_of_job
from fusionfleet.jobs.plan import Segment
from fusionfleet.jobs.reader import JobReader
from fusionfleet.messages import ObjectRef
from fusionfleet.services.operations import Operations
from fusionfleet.services.tenant_jobs import TenantJobs
from tests.support.api import Answer, call_api
from tests.support.fakes import FakeNotifier, FakeOrchestrator, FakeStorage
from tests.support.jobs import MEDIA, WORK, api_config, job_context

MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:render"
JPEG_HEAD = b"\xff\xd8\xff\xe0 a face"
WAV_HEAD = b"RIFF\x24\x00\x00\x00WAVEfmt a voice"


class Farm:
    def __init__(self) -> None:
        self.storage, self.orchestrator, self.notifier = FakeStorage(), FakeOrchestrator(), FakeNotifier()
        settings = api_config(MEDIA, WORK, MACHINE, "topic")
        self.jobs = TenantJobs(
            self.storage, JobReader(self.storage, self.orchestrator, WORK, MACHINE),
            Operations(self.storage, self.orchestrator, self.notifier, settings), MEDIA, WORK,
        )  # fmt: skip

    def call(self, method: str, path: str, body: object = None, tenant: str = "acme", query: str = "") -> Answer:
        return call_api(self.jobs, method, path, body, tenant, query)

    def started(self) -> tuple[str, str]:
        """A job of acme's, created, uploaded and started: (API job id, pipeline job id)."""
        created = self.call("POST", "/jobs", {"source": "face.jpg", "target": "clip.mp4"}).body
        for upload in created["uploads"]:
            self.storage.put_bytes(MEDIA, upload["key"], JPEG_HEAD if upload["name"] == "face.jpg" else b"media")
        api_id = created["job_id"]
        assert self.call("POST", f"/jobs/{api_id}/start").status == 202
        key = layout.tenant_manifest_key("acme", api_id)
        return api_id, pipeline_job_id(MEDIA, key, self.storage.head(MEDIA, key).etag)

    def sliced(self, job: str, status: str, done: int = 0, error: str | None = None) -> None:
        output = ObjectRef(bucket=MEDIA, key=f"tenants/acme/outputs/{job}.mp4")
        manifest = ObjectRef(bucket=MEDIA, key=layout.tenant_manifest_key("acme", name_of_job(job)), etag="e", size=10)
        context = job_context(job, segment_count=4, output=output, manifest=manifest)
        self.storage.put_json(WORK, layout.job_key(job), context.model_dump(mode="json"))
        # What the slicer and the workers keep of it: its summary and its entry in the job index.
        summary.write(self.storage, WORK, summary.started(context), summary.submitted_ms(context.submitted_at))
        plan = [Segment(i, i * 25, (i + 1) * 25, i * 1_000_000, (i + 1) * 1_000_000) for i in range(4)]
        self.storage.put_json(WORK, layout.plan_key(job), [segment.to_dict() for segment in plan])
        for index in range(done):
            self.storage.put_bytes(WORK, layout.segment_key(job, index), b"mp4")
            self.storage.put_json(WORK, layout.segment_record_key(job, index), {"status": "succeeded"})
            summary.update(self.storage, WORK, job, summary.segment_done(index, "w1", 1, 1.0))
        arn = execution_arn(MACHINE, job)
        self.orchestrator.states[arn] = Execution(
            arn, status, error=error, cause="the job ran out of time" if error else None,
            input={"job": context.model_dump(mode="json")},
        )  # fmt: skip


def test_a_started_job_reads_pending_then_running_with_its_segments() -> None:
    farm = Farm()
    api_id, job = farm.started()
    assert farm.call("GET", f"/jobs/{api_id}").body["state"] == "PENDING"
    farm.sliced(job, "RUNNING", done=1)
    assert farm.call("GET", f"/jobs/{api_id}").body == {
        "job_id": api_id, "state": "RUNNING", "segments": {"done": 1, "failed": 0, "total": 4},
        "created_at": farm.call("GET", f"/jobs/{api_id}").body["created_at"], "priority": "normal",
        # what the read model says it allows now, and that it has not ended
        "actions": ["cancel"], "ended": False,
    }  # fmt: skip


def test_a_succeeded_job_has_a_short_lived_download_url_for_its_output() -> None:
    farm = Farm()
    api_id, job = farm.started()
    farm.sliced(job, "SUCCEEDED", done=4)
    view = farm.call("GET", f"/jobs/{api_id}").body
    assert view["state"] == "SUCCEEDED" and view["segments"]["done"] == 4
    # (a download: the fake marks the link S3 is asked to answer as an attachment)
    assert view["download_url"] == f"https://{MEDIA}.fake/tenants/acme/outputs/{job}.mp4?expires=900&download=1"


def test_a_timed_out_job_reads_failed_with_its_reason() -> None:
    farm = Farm()
    api_id, job = farm.started()
    farm.sliced(job, "TIMED_OUT", error="States.Timeout")
    view = farm.call("GET", f"/jobs/{api_id}").body
    assert (view["state"], view["reason"]) == ("FAILED", "the job ran out of time")
    assert "download_url" not in view


def test_cancel_stops_the_tenants_running_job_and_it_reads_cancelled() -> None:
    farm = Farm()
    api_id, job = farm.started()
    farm.sliced(job, "RUNNING", done=1)
    # another tenant cannot
    assert farm.call("POST", f"/jobs/{api_id}/cancel", tenant="globex").status == 404
    answer = farm.call("POST", f"/jobs/{api_id}/cancel")
    assert answer.status == 202, answer.body
    assert api_id in answer.body["message"] and job not in answer.body["message"]
    assert farm.orchestrator.stopped == [(execution_arn(MACHINE, job), "JobCancelled")]
    assert [message["status"] for _topic, _subject, message in farm.notifier.published] == ["cancelled"]
    assert farm.call("GET", f"/jobs/{api_id}").body["state"] == "CANCELLED"
    # AND a second cancel is refused: the job is no longer running
    assert farm.call("POST", f"/jobs/{api_id}/cancel").status == 409


# ---------------------------------------------------------------- what the tenant dashboard reads


def test_the_detail_of_a_running_job_has_its_segments_under_the_apis_job_id() -> None:
    # GIVEN acme's job, sliced into 4 segments, one done
    farm = Farm()
    api_id, job = farm.started()
    farm.sliced(job, "RUNNING", done=1)
    # WHEN acme reads its detail
    answer = farm.call("GET", f"/jobs/{api_id}/detail")
    # THEN it has the job's view, one cell per segment, and never the pipeline's id
    assert answer.status == 200, answer.body
    assert answer.body["job"]["job_id"] == api_id and answer.body["job"]["state"] == "RUNNING"
    assert [segment["state"] for segment in answer.body["segments"]] == ["done", "pending", "pending", "pending"]
    assert {"attempts", "timings", "cost", "preview", "now"} <= set(answer.body)
    assert answer.body["preview"] is False
    assert job not in json.dumps(answer.body)


def test_the_detail_of_a_job_not_started_yet_is_pending_with_no_segments() -> None:
    farm = Farm()
    created = farm.call("POST", "/jobs", {"source": "face.jpg", "target": "clip.mp4", "priority": "high"}).body
    answer = farm.call("GET", f"/jobs/{created['job_id']}/detail")
    assert answer.status == 200
    assert (answer.body["job"]["state"], answer.body["job"]["priority"], answer.body["segments"]) == (
        "PENDING", "high", [],
    )  # fmt: skip


def test_the_preview_is_a_data_url_of_the_latest_frame_and_404_before_it() -> None:
    farm = Farm()
    api_id, job = farm.started()
    farm.sliced(job, "RUNNING", done=1)
    assert farm.call("GET", f"/jobs/{api_id}/preview").status == 404
    farm.storage.put_bytes(WORK, layout.frame_preview_key(job), b"\xff\xd8jpeg")
    answer = farm.call("GET", f"/jobs/{api_id}/preview")
    assert answer.status == 200
    assert answer.body == {"job_id": api_id, "image": "data:image/jpeg;base64,/9hqcGVn"}
    assert farm.call("GET", f"/jobs/{api_id}/detail").body["preview"] is True


def test_logs_list_the_attempts_and_one_segment_on_request() -> None:
    farm = Farm()
    api_id, job = farm.started()
    farm.sliced(job, "RUNNING")
    assert farm.call("GET", f"/jobs/{api_id}/logs").body == {"job_id": api_id, "attempts": [], "next": None}
    assert farm.call("GET", f"/jobs/{api_id}/logs", query="segment=1").status == 200
    assert farm.call("GET", f"/jobs/{api_id}/logs", query="segment=x").status == 400


def test_retry_runs_a_cancelled_job_again_under_the_apis_job_id() -> None:
    # GIVEN acme's job, cancelled with 1 of 4 segments rendered
    farm = Farm()
    api_id, job = farm.started()
    farm.sliced(job, "RUNNING", done=1)
    assert farm.call("POST", f"/jobs/{api_id}/cancel").status == 202
    farm.orchestrator.states[execution_arn(MACHINE, job)] = Execution(
        execution_arn(MACHINE, job), "ABORTED", input=farm.orchestrator.states[execution_arn(MACHINE, job)].input
    )
    # WHEN globex tries, then acme
    assert farm.call("POST", f"/jobs/{api_id}/retry", tenant="globex").status == 404
    answer = farm.call("POST", f"/jobs/{api_id}/retry")
    # THEN acme's retry starts a second run
    assert answer.status == 202, answer.body
    assert api_id in answer.body["message"] and job not in answer.body["message"]
    assert "of 4 segments" in answer.body["message"]
    # AND a running job cannot be retried
    assert farm.call("POST", f"/jobs/{api_id}/retry").status == 409


def test_retrying_a_job_that_was_never_started_is_409() -> None:
    farm = Farm()
    created = farm.call("POST", "/jobs", {"source": "face.jpg", "target": "clip.mp4"}).body
    assert farm.call("POST", f"/jobs/{created['job_id']}/retry").status == 409


def test_the_job_list_pages_by_its_cursor_newest_first_with_the_unstarted_jobs_on_the_first_page() -> None:
    # GIVEN acme's five started jobs and one created and never started
    farm = Farm()
    started = []
    for _ in range(5):
        api_id, job = farm.started()
        farm.sliced(job, "RUNNING", done=1)
        started.append(api_id)
    waiting = farm.call("POST", "/jobs", {"source": "face.jpg", "target": "clip.mp4"}).body["job_id"]
    # WHEN its jobs are read two at a time, following `next`
    seen, query, pages = [], "limit=2", 0
    while True:
        body = farm.call("GET", "/jobs", query=query).body
        seen += [(job["job_id"], job["state"]) for job in body["jobs"]]
        pages += 1
        if body["next"] is None:
            break
        query = f"limit=2&next={body['next']}"
    # THEN every job is listed once: the unstarted one first, then the started ones as the index orders them
    assert seen[0] == (waiting, "PENDING")
    assert sorted(job for job, _state in seen[1:]) == sorted(started) and len(seen) == 6
    assert all(state == "RUNNING" for _job, state in seen[1:]) and pages == 3
    # AND a cursor no page gave is refused with the reason
    refused = farm.call("GET", "/jobs", query="next=bm9wZQ")
    assert refused.status == 400 and "next" in json.dumps(refused.body)


def test_another_tenant_reads_none_of_the_dashboard_routes() -> None:
    # GIVEN acme's running job with a preview
    farm = Farm()
    api_id, job = farm.started()
    farm.sliced(job, "RUNNING", done=1)
    farm.storage.put_bytes(WORK, layout.frame_preview_key(job), b"jpeg")
    # THEN globex gets 404 from every route that names it, and an empty list
    for method, path in [("GET", "detail"), ("GET", "logs"), ("GET", "preview"), ("POST", "retry"),
                         ("POST", "cancel")]:  # fmt: skip
        answer = farm.call(method, f"/jobs/{api_id}/{path}", tenant="globex")
        assert answer.status == 404, (path, answer.body)
        assert job not in json.dumps(answer.body)
    assert farm.call("GET", "/jobs", tenant="globex").body["jobs"] == []
    assert [view["job_id"] for view in farm.call("GET", "/jobs").body["jobs"]] == [api_id]


def test_the_dashboard_routes_refuse_the_wrong_method_and_unknown_reads() -> None:
    farm = Farm()
    api_id, _job = farm.started()
    for method, path in [("POST", "detail"), ("POST", "logs"), ("POST", "preview"), ("GET", "retry")]:
        answer = farm.call(method, f"/jobs/{api_id}/{path}")
        assert answer.status == 405, (method, path)
        assert answer.headers["Allow"] == ("GET" if method == "POST" else "POST")
    assert farm.call("GET", f"/jobs/{api_id}/workers").status == 404
    assert farm.call("GET", "/workers").status == 404


def test_what_a_worker_could_not_do_is_refused_by_the_api_at_once_with_the_reason() -> None:
    # GIVEN a stack whose default engine is FaceFusion
    farm = Farm()
    farm.jobs.default_engine = "facefusion"
    # WHEN a job (naming no engine: the default's) asks for JPEG temp frames in the disk workflow
    # THEN POST /jobs says no
    lossy = {"temp_frame_format": "jpeg", "workflow_strategy": "disk"}
    refused = farm.call("POST", "/jobs", {"source": "face.jpg", "target": "clip.mp4", "options": lossy})
    assert refused.status == 400
    assert any("'jpeg' with the disk workflow" in problem for problem in refused.body["problems"])
    # WHEN a lip sync job's sources hold no audio file THEN its start is refused, nothing is written
    body = {"source": ["face.jpg", "voice.wav"], "target": "clip.mp4", "options": {"processors": ["lip_syncer"]}}
    created = farm.call("POST", "/jobs", body).body
    for upload in created["uploads"]:
        farm.storage.put_bytes(MEDIA, upload["key"], JPEG_HEAD if upload["name"] != "clip.mp4" else b"media")
    started = farm.call("POST", f"/jobs/{created['job_id']}/start")
    assert started.status == 400
    assert any("lip_syncer needs an audio file among the sources" in p for p in started.body["problems"])
    assert not farm.storage.list_keys(MEDIA, layout.tenant_manifest_key("acme", created["job_id"]))
    # AND once the voice really is audio, the same job starts
    (voice,) = [upload for upload in created["uploads"] if upload["name"] == "voice.wav"]
    farm.storage.put_bytes(MEDIA, voice["key"], WAV_HEAD)
    assert farm.call("POST", f"/jobs/{created['job_id']}/start").status == 202

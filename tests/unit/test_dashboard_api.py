"""The dashboard's HTTP API and page, served for real on 127.0.0.1 over an in-memory source."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.message import Message
from pathlib import Path
from typing import Any

import pytest

from fleetctl.dashboard import DashboardServer
from fleetctl.dashboard.api import list_query, plain
from fusionfleet.fleet.workers import WorkerView
from tests.support.dashboard import JPEG_BYTES, NOW, FakeDashboardSource, sample_batch, sample_job

pytestmark = pytest.mark.timeout(30)
STATIC = Path(__file__).resolve().parents[2] / "fleetctl" / "dashboard" / "static"
RUNNING_ID = "interview-0123456789abcdef"
FAILED_ID = "broken-fedcba9876543210"
DONE_ID = "finished-00112233aabbccdd"
BATCH_ID = "summer-0123456789abcdef"


@dataclass(frozen=True)
class Reply:
    status: int
    headers: Message
    body: bytes

    def json(self) -> Any:
        assert self.headers["Content-Type"] == "application/json"
        return json.loads(self.body)


@dataclass
class Served:
    source: FakeDashboardSource
    server: DashboardServer

    def request(
        self, path: str, method: str = "GET", body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> Reply:
        sent = {"Content-Type": "application/json"} if method == "POST" else {}
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.server.port}{path}", data=body, method=method, headers={**sent, **(headers or {})}
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return Reply(response.status, response.headers, response.read())
        except urllib.error.HTTPError as error:
            return Reply(error.code, error.headers, error.read())


def _source(broken: bool = False) -> FakeDashboardSource:
    heartbeat = NOW - timedelta(seconds=3)
    return FakeDashboardSource(
        jobs=[
            sample_job(RUNNING_ID, "RUNNING", age_s=30),
            sample_job(FAILED_ID, "FAILED", ("done", "failed"), age_s=600, preview=False),
            sample_job(DONE_ID, "SUCCEEDED", ("done",) * 3, age_s=3600),
        ],
        workers=[
            WorkerView("worker-1", "render", "classic", f"{RUNNING_ID}:2", 7, heartbeat, False),
            WorkerView("worker-2", "render", "classic", None, 3, NOW - timedelta(minutes=5), True),
        ],
        broken=broken,
        batches=[sample_batch(BATCH_ID)],
    )


def _serve(source: FakeDashboardSource) -> Iterator[Served]:
    server = DashboardServer(source, port=0)
    thread = server.start_in_thread()
    try:
        yield Served(source, server)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def served() -> Iterator[Served]:
    yield from _serve(_source())


@pytest.fixture
def broken() -> Iterator[Served]:
    yield from _serve(_source(broken=True))


# --- the page --------------------------------------------------------------------------------------


def test_the_page_and_its_files_are_served_with_a_strict_policy(served: Served) -> None:
    # WHEN the page is fetched THEN it is HTML that loads its script and style from the server itself
    page = served.request("/")
    assert page.status == 200
    assert page.headers["Content-Type"].startswith("text/html")
    assert b'src="/static/app.js"' in page.body and b'href="/static/style.css"' in page.body
    assert "default-src 'self'" in page.headers["Content-Security-Policy"]
    assert page.headers["X-Content-Type-Options"] == "nosniff"
    # AND its script and style are served with their types
    script = served.request("/static/app.js")
    assert script.status == 200 and script.headers["Content-Type"].startswith("text/javascript")
    assert served.request("/static/style.css").headers["Content-Type"].startswith("text/css")
    # AND nothing else is
    assert served.request("/static/../server.py").status == 404
    assert served.request("/etc/passwd").status == 404


@pytest.mark.parametrize(("page", "script_name"), [("index.html", "app.js"), ("job.html", "render.js"),
                                                  ("tenant.html", "tenant.js"),
                                                  ("tenant.html", "preview.js")])  # fmt: skip
def test_the_script_puts_data_on_the_page_only_as_text(page: str, script_name: str) -> None:
    # GIVEN the pages' scripts and markup WHEN searched for ways to write HTML from strings
    script = (STATIC / script_name).read_text()
    markup = (STATIC / page).read_text()
    # THEN there are none (data goes through textContent and attribute values), and no inline script
    assert not re.search(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function", script)
    assert not re.search(r"<script(?![^>]*\bsrc=)", markup)
    assert not re.search(r"\son[a-z]+=", markup)


def test_the_server_listens_on_loopback_only(served: Served) -> None:
    # GIVEN a dashboard started with no address WHEN its socket is read THEN it is bound to 127.0.0.1
    assert served.server.server_address[0] == "127.0.0.1"
    assert served.server.url == f"http://127.0.0.1:{served.server.port}/"


def test_a_request_for_another_host_name_is_refused(served: Served) -> None:
    # GIVEN a request whose Host is a name rebound to 127.0.0.1 (DNS rebinding from a web page)
    reply = served.request("/api/jobs", headers={"Host": "evil.example:8080"})
    # THEN it is refused and the source is never asked
    assert reply.status == 403
    assert served.source.calls == []
    # AND the loopback names are served
    assert served.request("/api/jobs", headers={"Host": f"localhost:{served.server.port}"}).status == 200


# --- reading ---------------------------------------------------------------------------------------


def test_jobs_are_listed_newest_first_with_progress_and_submission_time(served: Served) -> None:
    # WHEN the job list is fetched
    reply = served.request("/api/jobs")
    # THEN every job is there, newest first, with its progress and an ISO submission time
    data = reply.json()
    assert reply.status == 200
    assert [job["job_id"] for job in data["jobs"]] == [RUNNING_ID, FAILED_ID, DONE_ID]
    running = data["jobs"][0]
    assert (running["state"], running["priority"]) == ("RUNNING", "high")
    assert running["segments"] == {"total": 4, "done": 2, "failed": 0, "running": 0}
    assert (running["actions"], running["ended"]) == (["cancel"], False)
    assert datetime.fromisoformat(running["submitted_at"]) == NOW - timedelta(seconds=30)
    # AND the server's clock comes along, so the page computes ages from it
    assert abs(datetime.fromisoformat(data["now"]) - datetime.now(UTC)) < timedelta(seconds=30)
    assert served.source.calls == [("list_page", "None", "20", "")]


def test_the_job_list_is_filtered_by_state_and_limited(served: Served) -> None:
    # WHEN a state and a limit are asked for THEN the source gets them (the state in capitals)
    failed = served.request("/api/jobs?state=failed&limit=5").json()
    assert [job["job_id"] for job in failed["jobs"]] == [FAILED_ID]
    assert served.source.calls[-1] == ("list_page", "FAILED", "5", "")
    assert len(served.request("/api/jobs?limit=1").json()["jobs"]) == 1


def test_the_job_list_pages_by_the_cursor_the_source_gave(served: Served) -> None:
    # WHEN the list is read a job at a time, following `next`
    first = served.request("/api/jobs?limit=1").json()
    second = served.request(f"/api/jobs?limit=1&next={first['next']}").json()
    # THEN the cursor reaches the source as given, and the pages follow each other
    assert served.source.calls[-1] == ("list_page", "None", "1", first["next"])
    assert [first["jobs"][0]["job_id"], second["jobs"][0]["job_id"]] == [RUNNING_ID, FAILED_ID]


def test_a_state_that_is_no_job_state_is_a_400_naming_the_states(served: Served) -> None:
    reply = served.request("/api/jobs?state=DREAMING")
    assert reply.status == 400
    assert "RUNNING" in reply.json()["error"]


@pytest.mark.parametrize(
    "query", ["limit=0", "limit=201", "limit=ten", "limit=-1", "state=RUNNING;DROP", "state=" + "A" * 30]
)
def test_a_bad_list_query_is_a_400_that_says_why(served: Served, query: str) -> None:
    # WHEN the list is asked for with a bad limit or state THEN the answer is 400 with the reason
    reply = served.request(f"/api/jobs?{query}")
    assert reply.status == 400
    assert "must be" in reply.json()["error"]
    assert served.source.calls == []


def test_a_job_shows_its_segments_attempts_timings_and_preview(served: Served) -> None:
    # WHEN one job is fetched
    data = served.request(f"/api/jobs/{RUNNING_ID}").json()
    # THEN its view, each segment with state, worker and attempt, its attempts and timings are there
    assert data["job"]["job_id"] == RUNNING_ID
    assert [(s["index"], s["state"], s["worker"], s["attempt"]) for s in data["segments"]] == [
        (0, "done", "worker-1", 1), (1, "done", "worker-1", 1), (2, "running", "worker-1", 2), (3, "pending", "", 1),
    ]  # fmt: skip
    assert (data["segments"][1]["start_frame"], data["segments"][1]["end_frame"]) == (48, 95)
    assert [(a["segment"], a["status"], a["engine_s"]) for a in data["attempts"]] == [
        (0, "succeeded", 3.25), (1, "succeeded", 3.25),
    ]  # fmt: skip
    assert data["timings"] == {"slice_s": 1.5, "render_s": 12.25}
    assert data["preview_url"] == f"/api/jobs/{RUNNING_ID}/preview.jpg"
    # AND a job without a preview says so
    assert served.request(f"/api/jobs/{FAILED_ID}").json()["preview_url"] is None


def test_a_batch_is_one_view_that_opens_into_a_page_of_its_items(served: Served) -> None:
    # WHEN a batch is fetched a page of two items at a time
    first = served.request(f"/api/jobs/{BATCH_ID}?items=2").json()
    # THEN it is the batch's view with its items' counts, and its first two items, each as the read model shows it
    assert (first["job"]["kind"], first["job"]["items"]["total"], first["job"]["state"]) == ("batch", 5, "RUNNING")
    assert [(i["index"], i["state"], i["segments"]["done"], i["output"]) for i in first["items"]] == [
        (0, "SUCCEEDED", 1, "s3://media/outputs/summer/0.jpg"), (1, "FAILED", 0, None),
    ]  # fmt: skip
    assert first["items"][1]["reason"] == "segment 0 failed" and first["next_item"] == 2
    assert first["segments"] == [] and first["preview_url"] is None
    # AND the last page says there is no next one; an item not started is PENDING
    last = served.request(f"/api/jobs/{BATCH_ID}?items_from=4&items=2").json()
    assert [(i["index"], i["state"], i["job_id"]) for i in last["items"]] == [(4, "PENDING", f"{BATCH_ID}.0004")]
    assert last["next_item"] is None
    # AND a bad page is a 400 naming it
    reply = served.request(f"/api/jobs/{BATCH_ID}?items=0")
    assert reply.status == 400 and "items must be a whole number from 1 to 500" in reply.json()["error"]


def test_the_preview_is_a_jpeg_and_a_404_until_there_is_one(served: Served) -> None:
    # WHEN the preview of a job that has one is fetched THEN it is the JPEG's bytes
    reply = served.request(f"/api/jobs/{RUNNING_ID}/preview.jpg")
    assert (reply.status, reply.headers["Content-Type"], reply.body) == (200, "image/jpeg", JPEG_BYTES)
    # AND a job with none yet answers 404
    assert served.request(f"/api/jobs/{FAILED_ID}/preview.jpg").status == 404


def test_workers_show_their_heartbeat_and_the_lost_ones(served: Served) -> None:
    # WHEN the workers are fetched THEN each has its role, current segment, count and heartbeat
    workers = served.request("/api/workers").json()["workers"]
    assert [(w["name"], w["current"], w["segments_done"], w["lost"]) for w in workers] == [
        ("worker-1", f"{RUNNING_ID}:2", 7, False), ("worker-2", None, 3, True),
    ]  # fmt: skip
    assert datetime.fromisoformat(workers[0]["last_heartbeat"]) == NOW - timedelta(seconds=3)


@pytest.mark.parametrize("suffix", ["", "/preview.jpg"])
def test_an_unknown_job_is_a_404(served: Served, suffix: str) -> None:
    reply = served.request(f"/api/jobs/nobody-0000000000000000{suffix}")
    assert reply.status == 404
    assert "nobody-0000000000000000" in reply.json()["error"]


@pytest.mark.parametrize(
    "path", ["/api/jobs/..%2F..%2Fetc/cancel", "/api/jobs/a%20b", "/api/jobs/x/segments", "/api/nothing", "/api"]
)
def test_paths_that_name_no_resource_are_a_404_without_asking_the_source(served: Served, path: str) -> None:
    assert served.request(path).status == 404
    assert served.source.calls == []


# --- acting ----------------------------------------------------------------------------------------


def test_cancel_stops_a_running_job_and_says_so(served: Served) -> None:
    # WHEN a running job is cancelled
    reply = served.request(f"/api/jobs/{RUNNING_ID}/cancel", "POST", b"{}")
    # THEN the answer carries the source's message and the job is cancelled
    assert reply.status == 200
    assert reply.json() == {"job_id": RUNNING_ID, "action": "cancel", "message": f"job {RUNNING_ID} cancelled"}
    assert served.source.jobs[RUNNING_ID].job.state == "CANCELLED"
    # AND cancelling it again is refused with the reason (409), changing nothing
    again = served.request(f"/api/jobs/{RUNNING_ID}/cancel", "POST")
    assert again.status == 409 and "it has ended" in again.json()["error"]
    assert served.source.jobs[RUNNING_ID].job.state == "CANCELLED"


def test_retry_runs_a_failed_job_again_and_refuses_a_running_one(served: Served) -> None:
    # WHEN a failed job is retried THEN it runs again
    assert served.request(f"/api/jobs/{FAILED_ID}/retry", "POST").json()["message"] == f"job {FAILED_ID} runs again"
    # AND a running job cannot be retried: 409 with the reason
    refused = served.request(f"/api/jobs/{RUNNING_ID}/retry", "POST")
    assert refused.status == 409
    assert "it is still running" in refused.json()["error"]


@pytest.mark.parametrize("action", ["cancel", "retry"])
def test_an_action_on_an_unknown_job_is_a_404(served: Served, action: str) -> None:
    assert served.request(f"/api/jobs/nobody-0000000000000000/{action}", "POST").status == 404


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("GET", f"/api/jobs/{RUNNING_ID}/cancel", "POST"),
        ("GET", f"/api/jobs/{RUNNING_ID}/retry", "POST"),
        ("POST", "/api/jobs", "GET"),
        ("DELETE", f"/api/jobs/{RUNNING_ID}", "GET"),
        ("POST", "/", "GET"),
    ],
)
def test_a_method_a_resource_does_not_take_is_a_405_naming_the_allowed_one(
    served: Served, method: str, path: str, allowed: str
) -> None:
    reply = served.request(path, method, b"{}" if method == "POST" else None)
    assert reply.status == 405
    assert reply.headers["Allow"] == allowed
    assert served.source.jobs[RUNNING_ID].job.state == "RUNNING"


def test_an_action_posted_as_a_form_is_refused(served: Served) -> None:
    # GIVEN a POST a plain HTML form on another site could send (no JSON content type)
    reply = served.request(
        f"/api/jobs/{RUNNING_ID}/cancel", "POST", b"x=1", {"Content-Type": "application/x-www-form-urlencoded"}
    )
    # THEN it is refused and the job keeps running
    assert reply.status == 415
    assert served.source.calls == []
    assert served.source.jobs[RUNNING_ID].job.state == "RUNNING"


# --- failures --------------------------------------------------------------------------------------


def test_a_stack_that_does_not_answer_is_a_502_and_the_server_keeps_serving(broken: Served) -> None:
    # GIVEN a source whose every call fails WHEN the API is asked THEN each answer is a 502 with the cause
    for path in ("/api/jobs", "/api/workers", f"/api/jobs/{RUNNING_ID}"):
        reply = broken.request(path)
        assert reply.status == 502
        assert "Could not connect" in reply.json()["error"]
    # AND the page itself is still served
    assert broken.request("/").status == 200


# --- pure parts ------------------------------------------------------------------------------------


def test_the_list_query_is_read_and_checked_alone() -> None:
    assert list_query("state=failed&limit=5") == ("FAILED", 5)
    assert list_query("") == (None, 20)


def test_records_become_json_values() -> None:
    # GIVEN a record with a datetime, a tuple and an infinite float WHEN made plain THEN each is JSON
    value = plain({"at": NOW, "pair": (1, 2), "bad": float("inf"), "job": sample_job(states=("done",))})
    assert value["at"] == "2026-12-03T09:00:00+00:00"
    assert (value["pair"], value["bad"]) == ([1, 2], None)
    assert value["job"]["segments"][0]["state"] == "done"
    json.dumps(value)

"""The operator dashboard's test render: POST /api/jobs/{id}/try starts one with the job's settings,
and a test render's page lists its pictures, each served as a PNG."""

from __future__ import annotations

import json

import pytest

from fusionfleet import layout
from fusionfleet.adapters.orchestrator import Execution, execution_arn
from fusionfleet.errors import OperationRefused
from fusionfleet.jobs.ids import job_id as derive_job_id
from fusionfleet.jobs.manifest import parse_manifest
from fusionfleet.jobs.reader import JobReader
from fusionfleet.messages import ObjectRef
from fusionfleet.services.trial_renders import TrialRenders, trial_manifest
from tests.support.dashboard import PNG_BYTES
from tests.support.fakes import FakeOrchestrator, FakeStorage
from tests.support.jobs import MEDIA, WORK, job_context
from tests.unit.test_dashboard_api import DONE_ID, Served, served

__all__ = ["served"]  # the fixture, used by name
MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:render"


def test_a_test_render_is_started_from_a_jobs_page_and_shows_its_pictures(served: Served) -> None:
    reply = served.request(f"/api/jobs/{DONE_ID}/try", "POST", json.dumps({"frames": [0, 120]}).encode())
    assert reply.status == 200 and reply.json()["message"] == f"test render {DONE_ID}-try of frame(s) 0, 120 started"
    assert ("try", DONE_ID, "0,120") in served.source.calls
    page = served.request(f"/api/jobs/{DONE_ID}-try").json()
    assert page["pictures"] == [f"/api/jobs/{DONE_ID}-try/frames/0", f"/api/jobs/{DONE_ID}-try/frames/120"]
    picture = served.request(f"/api/jobs/{DONE_ID}-try/frames/120")
    assert (picture.status, picture.headers["Content-Type"], picture.body) == (200, "image/png", PNG_BYTES)
    # a frame it did not render, and a job that is no test render, have no picture
    assert served.request(f"/api/jobs/{DONE_ID}-try/frames/7").status == 404
    assert served.request(f"/api/jobs/{DONE_ID}/frames/0").status == 404
    assert served.request(f"/api/jobs/{DONE_ID}").json()["pictures"] == []


@pytest.mark.parametrize("body", [b"{}", b'{"frames": []}', b'{"frames": [-1]}', b'{"frames": ["0"]}', b"[1]"])
def test_a_test_render_needs_frame_numbers(served: Served, body: bytes) -> None:
    reply = served.request(f"/api/jobs/{DONE_ID}/try", "POST", body)
    assert reply.status == 400 and "frame numbers from 0" in reply.json()["error"]
    assert not [call for call in served.source.calls if call[0] == "try"]


def test_the_test_renders_manifest_is_the_jobs_with_its_frames_and_no_webhook() -> None:
    manifest = {"version": 1, "source": ["inputs/a/face.jpg"], "targets": ["inputs/a/"], "output": "outputs/a/",
                "options": {"face_selector_mode": "many"}, "webhook": "https://example.com/hook",
                "metadata": {"order": 7}, "item_notices": True, "priority": "low"}  # fmt: skip
    assert trial_manifest(manifest, "inputs/a/clip.mp4", [5, 1]) == {
        "version": 1, "source": ["inputs/a/face.jpg"], "options": {"face_selector_mode": "many"}, "priority": "low",
        "target": "inputs/a/clip.mp4", "frames": [5, 1],
    }  # fmt: skip
    # A poster strip tried again at other frames: those frames, not the strip's (both would be refused)
    strip = {"version": 1, "source": ["inputs/a/face.jpg"], "target": "inputs/a/clip.mkv", "spread_frames": 8}
    assert trial_manifest(strip, "inputs/a/clip.mkv", [3])["frames"] == [3]
    assert "spread_frames" not in trial_manifest(strip, "inputs/a/clip.mkv", [3])


def _farm() -> tuple[FakeStorage, TrialRenders]:
    storage, orchestrator = FakeStorage(), FakeOrchestrator()
    manifest = {"version": 1, "source": ["inputs/face.jpg"], "target": "inputs/clip.mp4", "engine": "classic",
                "webhook": "https://example.com/hook"}  # fmt: skip
    storage.put_bytes(MEDIA, "jobs/clip.json", json.dumps(manifest).encode())
    context = job_context("clip-0123456789abcdef")
    storage.put_json(WORK, layout.job_key(context.job_id), context.model_dump(mode="json"))
    arn = execution_arn(MACHINE, context.job_id)
    orchestrator.states[arn] = Execution(arn, "SUCCEEDED", input={"job": context.model_dump(mode="json")})
    reader = JobReader(storage, orchestrator, WORK, MACHINE)
    return storage, TrialRenders(storage, reader, clock=lambda: 1_765_000_000.0)


def test_starting_a_test_render_drops_a_manifest_beside_the_jobs() -> None:
    storage, trials = _farm()
    started = trials.start("clip-0123456789abcdef", [0, 50])
    key = "jobs/clip-try-20251206-054640.json"
    raw = storage.get_bytes(MEDIA, key)
    assert started == derive_job_id(MEDIA, key, storage.head(MEDIA, key).etag)
    parsed = parse_manifest(raw, key)  # as the slicer will read it
    assert parsed.frames == (0, 50) and parsed.engine == "classic" and parsed.webhook is None
    assert parsed.output == "outputs/clip-try-20251206-054640/"
    # a job that is no test render has no pictures; an unknown frame of one has none either
    assert trials.frames("clip-0123456789abcdef") == [] and trials.picture("clip-0123456789abcdef", 0) is None


def test_a_test_render_whose_frames_the_manifest_refuses_is_refused_and_writes_nothing() -> None:
    storage, trials = _farm()
    with pytest.raises(OperationRefused, match="frames: each frame once"):
        trials.start("clip-0123456789abcdef", [3, 3])
    assert [key for key in storage.list_keys(MEDIA, "jobs/") if "try" in key] == []


def test_a_succeeded_test_renders_pictures_are_read_from_its_prefix() -> None:
    storage, trials = _farm()
    context = job_context("try-0123456789abcdef", trial_frames=(9, 2),
                          output=ObjectRef(bucket=MEDIA, key="outputs/try/"))  # fmt: skip
    storage.put_json(WORK, layout.job_key(context.job_id), context.model_dump(mode="json"))
    orchestrator = trials.reader.records.orchestrator
    arn = execution_arn(MACHINE, context.job_id)
    orchestrator.states[arn] = Execution(arn, "SUCCEEDED", input={"job": context.model_dump(mode="json")})  # type: ignore[attr-defined]
    storage.put_bytes(MEDIA, layout.trial_frame_key("outputs/try/", 9), PNG_BYTES)
    assert trials.frames(context.job_id) == [9, 2]
    assert trials.picture(context.job_id, 9) == PNG_BYTES
    assert trials.picture(context.job_id, 2) is None  # not written (yet)
    assert trials.picture(context.job_id, 4) is None  # not one of its frames

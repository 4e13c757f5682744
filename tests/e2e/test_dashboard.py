"""The live dashboard in a real browser: a job submitted on the local stack appears with its segments
and moves to done; `local status` names the dashboard's URL."""

from __future__ import annotations

import json
import re
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.conftest import Stack
from tests.e2e.helpers import drop_job, wait_until
from tests.support.browser import Element, dump_dom, elements, screenshot
from tests.support.media import write_video

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


@dataclass(frozen=True)
class JobView:
    """What the page shows of the job in `?job=<id>`: read from the DOM after its scripts ran."""

    job_id: str
    state: str
    segment_states: tuple[str, ...]
    listed: dict[str, str]  # the job list: job id → state
    workers: dict[str, bool]  # worker name → shown as lost
    cost: str  # the job's cost estimate as the page shows it
    timings: dict[str, str]  # label → text, as the job's timings list shows them

    @property
    def done(self) -> int:
        return self.segment_states.count("done")

    @classmethod
    def read(cls, html: str) -> JobView:
        found = elements(html)
        section = next((e for e in found if e.attrs.get("id") == "job"), None)
        assert section is not None, html[:2000]
        return cls(
            job_id=section.attrs.get("data-job-id", ""),
            state=section.attrs.get("data-state", ""),
            segment_states=tuple(e.attrs["data-state"] for e in found if "seg" in e.attrs.get("class", "").split()
                                 and "data-index" in e.attrs),
            listed={e.attrs["data-job-id"]: e.attrs["data-state"] for e in found if e.tag == "tr"
                    and "data-job-id" in e.attrs},
            workers={e.attrs["data-worker"]: e.attrs["data-lost"] == "true" for e in found if e.tag == "tr"
                     and "data-worker" in e.attrs},
            cost=next((e.text for e in found if e.attrs.get("id") == "cost-usd"), ""),
            timings=_pairs(found),
        )  # fmt: skip


def _pairs(found: list[Element]) -> dict[str, str]:
    """Each <dt>'s text → the text of the <dd> after it."""
    pairs, label = {}, None
    for element in found:
        if element.tag == "dt":
            label = element.text
        elif element.tag == "dd" and label is not None:
            pairs[label], label = element.text, None
    return pairs


def test_local_status_names_the_dashboard_and_it_serves_the_page(stack: Stack) -> None:
    # GIVEN the local stack started by `local up`
    url = stack.state().dashboard_url
    assert url is not None and url.startswith("http://127.0.0.1:")
    # WHEN its status is asked for THEN one line is exactly `dashboard <url>`
    status = stack.cli("local", "status", "--state-dir", str(stack.state_dir))
    assert f"dashboard {url}" in status.stdout.splitlines(), status.stdout
    assert any(line.startswith("dashboard ") and "running" in line for line in status.stdout.splitlines())
    # AND the URL serves the page
    with urllib.request.urlopen(url, timeout=10) as response:
        assert b"FusionFleet" in response.read()


def test_a_submitted_job_appears_with_its_segments_and_moves_to_done(
    stack: Stack, browser: str, tmp_path: Path
) -> None:
    # GIVEN the dashboard of the local stack and a 20 s clip (5 segments of 4 s)
    url = stack.state().dashboard_url
    assert url is not None
    clip = write_video(tmp_path / "twenty.mp4", seconds=20, fps=25, width=320, height=240)
    # WHEN a job is submitted and its page is watched in headless Chromium
    job = drop_job(stack, "dashboard-e2e", clip)
    page = f"{url}?job={job}"
    seen: list[JobView] = []
    shots: list[Path] = []

    def look() -> bool:
        view = JobView.read(dump_dom(page))
        seen.append(view)
        if view.state == "RUNNING" and 0 < view.done < len(view.segment_states) and not shots:
            shots.append(screenshot(page, tmp_path / "dashboard-running.png"))
        return view.state == "SUCCEEDED" and view.done == len(view.segment_states) > 0

    finished = wait_until(look, timeout_s=300, poll_s=1)
    # THEN the job appeared with its five segments and ended with every one done
    assert finished, f"{seen[-3:]}\n{stack.logs()}"
    # (before the slicer has taken it the page says the job is not found: no job is shown)
    shown = [view for view in seen if view.job_id]
    assert all(view.job_id == job for view in shown), shown
    with_segments = [view for view in shown if view.segment_states]
    assert with_segments and all(len(view.segment_states) == 5 for view in with_segments), seen
    last = seen[-1]
    assert last.segment_states == ("done",) * 5
    # AND the job list shows it as succeeded, and the workers are there and alive
    assert last.listed.get(job) == "SUCCEEDED", last.listed
    # AND its timings show when the merge started as a time of day, not as epoch seconds
    assert re.fullmatch(r"\d\d:\d\d:\d\d UTC", last.timings.get("merge started at", "")), last.timings
    assert {"worker-1", "worker-2"} <= set(last.workers), last.workers
    assert not last.workers["worker-1"] and not last.workers["worker-2"]
    # AND the progress went through the states the page shows (never backwards)
    dones = [view.done for view in with_segments]
    assert dones == sorted(dones)
    # AND the API the page reads agrees
    with urllib.request.urlopen(f"{url}api/jobs/{job}", timeout=30) as response:
        detail = json.loads(response.read())
    assert detail["job"]["state"] == "SUCCEEDED"
    assert [segment["state"] for segment in detail["segments"]] == ["done"] * 5
    # AND the page shows the job's cost: the merge's figure, in dollars at the stack's GPU price
    assert detail["cost"]["final"] is True and detail["cost"]["billed_gpu_s"] > 0
    price = detail["cost"]["gpu_hourly_price"]
    assert last.cost == f"${detail['cost']['estimated_usd']:.4f} at ${price}/GPU-hour", last.cost
    # AND the latest swapped frame is there as a JPEG
    assert detail["preview_url"] == f"/api/jobs/{job}/preview.jpg"
    with urllib.request.urlopen(f"{url}{detail['preview_url'][1:]}", timeout=30) as response:
        assert response.headers["Content-Type"] == "image/jpeg" and response.read()[:2] == b"\xff\xd8"
    # AND a screenshot of the finished job is a PNG
    final = screenshot(page, tmp_path / "dashboard-done.png")
    for path in [*shots, final]:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

"""A tenant starts a job from its page (the local stack's /tenant/), follows it, plays and downloads its output.

Playwright drives Debian's Chromium as a person would: choose two pictures of a face and a clip, see the
processors and their options as the API's GET /options describes them (FaceFusion's catalogue), pick two
frames and preview them (each file goes straight to the bucket with the API's presigned POST, its
progress shown per file), then start the job, which sends nothing again; it opens in the job page, whose
segment grid and progress figures advance as its segments are
rendered (each slowed a few seconds, so the page's poll sees the job part way); once it has succeeded its
output plays in the page, and its download link gives the rendered video, every frame of it. A file over
the upload limit is refused with the reason before anything is sent.

With FUSIONFLEET_SCREENSHOT_DIR set (docs/screenshots) the filled form (the README's picture) and the job
page part way are saved there as small PNGs.
"""

from __future__ import annotations

import re
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import cv2
import pytest
from playwright.sync_api import Page, expect

from fleetctl.local.supervisor import tenant_page_url
from fleetctl.samples import grace_hopper, grace_hopper_path
from tests.e2e.conftest import Stack
from tests.e2e.helpers import api_token, api_url
from tests.support.browser import page, save_screenshot, until, video_state
from tests.support.media import decode_all, write_video

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
GIB = 1024**3
SECONDS, FPS = 12, 25  # 300 frames: three segments at this size (the farm's 100-frame segments)
SEGMENTS = 3
SLOW_S = 6  # each segment sleeps once: two workers render two, the third runs on while two are done
TENANT = "studio"  # this test's own tenant, so the slowing rule touches no other test's job
RUN_S = 300
PREVIEWED = (50, 200)

# What the job page shows of its progress, read at once: the grid's cells and the figures above it, and
# the job's row in the list.
PROGRESS = """() => {
  const job = document.getElementById("job");
  const cells = [...document.querySelectorAll("#segments .seg")];
  const row = document.querySelector(`#jobs tr[data-job-id="${job.dataset.jobId}"]`);
  return {
    state: job.hidden ? "" : job.dataset.state || "",
    cells: cells.length,
    done_cells: cells.filter((cell) => cell.dataset.state === "done").length,
    done: Number(document.getElementById("seg-done").textContent),
    total: Number(document.getElementById("seg-total").textContent),
    listed: row ? row.cells[4].textContent : "",
  };
}"""
PLAY_MUTED = "async () => { const v = document.getElementById('output'); v.muted = true; await v.play(); }"


def _follow(shown: Page, timeout_s: float) -> list[dict[str, Any]]:
    """The job page's progress, read every quarter second until its job succeeded; a screenshot of it
    part way (the first reading with some segments done and some not)."""
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout_s
    while not seen or seen[-1]["state"] != "SUCCEEDED":
        assert time.monotonic() < deadline, f"the job did not succeed in {timeout_s} s: {seen[-3:]}"
        seen.append(dict(shown.evaluate(PROGRESS)))
        if 0 < seen[-1]["done"] < SEGMENTS and not any(0 < earlier["done"] < SEGMENTS for earlier in seen[:-1]):
            save_screenshot(shown.locator("#job").screenshot(), "tenant-job-running.png")
        shown.wait_for_timeout(250)
    return seen


def test_a_tenant_starts_a_job_from_its_page_follows_it_and_plays_and_downloads_its_output(
    stack: Stack, browser: str, tmp_path: Path
) -> None:
    # GIVEN a tenant signed in on its page, two pictures of a face, a 12 s clip, a file past the 2 GiB upload
    # limit, and workers that take 6 s longer over each of the tenant's segments
    api, dashboard = api_url(stack), stack.state().dashboard_url
    assert dashboard is not None
    mirrored = tmp_path / "grace-mirrored.jpg"
    cv2.imwrite(str(mirrored), cv2.flip(grace_hopper(), 1))
    clip = write_video(tmp_path / "clip.mp4", seconds=SECONDS, fps=FPS, width=320, height=240)
    huge = tmp_path / "huge.mp4"
    with huge.open("wb") as sparse:  # its size is all the page reads of it: no disk spent
        sparse.truncate(3 * GIB)
    stack.set_faults([{"job": f"{TENANT}_", "action": "slow", "seconds": SLOW_S}])
    try:
        with page((1400, 900), timeout_ms=30_000) as shown:
            shown.on("console", lambda message: print(f"page: {message.type}: {message.text}"))  # shown on failure
            shown.goto(tenant_page_url(dashboard, api, api_token(stack, TENANT)))
            # WHEN the tenant opens the form
            shown.get_by_role("button", name="New job").click()
            form = shown.get_by_role("region", name="New job")
            # THEN it offers FaceFusion's processors, face swapper chosen, with that processor's options
            expect(form.get_by_role("checkbox", name="face swapper")).to_be_checked()
            expect(form.get_by_role("group", name="face swapper options")).to_be_visible()
            expect(form.get_by_role("combobox", name="face swapper model")).to_have_value("hyperswap_1a_256")
            form.get_by_role("checkbox", name="face enhancer").check()
            expect(form.get_by_role("group", name="face enhancer options")).to_be_visible()
            form.get_by_role("checkbox", name="face enhancer").uncheck()
            # WHEN it chooses a target over the limit THEN it is refused with the reason, nothing sent
            form.get_by_label("Source faces").set_input_files([grace_hopper_path(), mirrored])
            form.get_by_label("Targets").set_input_files(huge)
            form.get_by_label("Engine").select_option("copy")
            form.get_by_role("button", name="Start job").click()
            expect(form.get_by_role("alert")).to_contain_text("'huge.mp4' is 3221225472 bytes, over the upload limit")
            expect(form.get_by_role("list", name="Uploads").get_by_role("listitem")).to_have_count(0)
            # WHEN it chooses the clip instead THEN the refusal is gone and the clip plays in the form's preview
            form.get_by_label("Targets").set_input_files(clip)
            expect(form.get_by_role("alert")).to_be_hidden()
            preview = form.get_by_role("region", name="Preview")
            expect(preview.get_by_role("status")).to_contain_text("Scrub clip.mp4")
            save_screenshot(form.screenshot(), "tenant-new-job.png")
            # WHEN it picks two frames and previews them
            for frame in PREVIEWED:
                preview.get_by_role("slider", name="Frame").fill(str(frame))
                expect(preview.get_by_text(f"frame {frame} of 0–299")).to_be_visible()
                preview.get_by_role("button", name="Pick this frame").click()
            preview.get_by_role("button", name="Preview frames").click()
            # THEN each file was uploaded, its progress full, and both frames come back rendered
            for path in (grace_hopper_path(), mirrored, clip):
                bar = form.get_by_role("progressbar", name=f"upload of {path.name}")
                expect(bar).to_have_attribute("value", str(path.stat().st_size))
            for frame in PREVIEWED:
                expect(preview.get_by_role("img", name=f"frame {frame} rendered")).to_be_visible(timeout=RUN_S * 1000)
            # WHEN it starts the job
            form.get_by_role("button", name="Start job").click()
            # THEN it opened in the job page, no file sent again (the preview's are named by their keys)
            expect(shown).to_have_url(re.compile(r"/tenant/\?job="))
            expect(form.get_by_role("list", name="Uploads").get_by_role("listitem")).to_have_count(0)
            job_id = shown.url.split("job=", 1)[1]
            job = shown.locator("#job")
            expect(job).to_have_attribute("data-job-id", job_id)
            # AND its grid and figures advanced, segment by segment, to the end
            seen = _follow(shown, RUN_S)
            sliced = [reading for reading in seen if reading["cells"]]
            assert all(reading["cells"] == reading["total"] == SEGMENTS for reading in sliced), sliced
            assert all(reading["done"] == reading["done_cells"] for reading in seen), seen  # figures = grid
            done = [reading["done"] for reading in sliced]
            assert done == sorted(done) and done[-1] == SEGMENTS, done
            assert any(0 < count < SEGMENTS for count in done), f"never seen part way: {done}"
            assert seen[-1]["listed"] == f"{SEGMENTS}/{SEGMENTS}", seen[-1]
            expect(form.get_by_role("alert")).to_be_hidden()
            # AND its output plays in the page: the video element holds the whole clip and shows its frames
            expect(shown.locator("#output-caption")).to_have_text("the output")
            until(shown, "() => document.getElementById('output').readyState >= 1")
            played = video_state(shown, "output")
            assert played["width"] == 320 and abs(played["duration"] - SECONDS) < 0.2, played
            shown.evaluate(PLAY_MUTED)
            until(shown, "() => document.getElementById('output').currentTime > 0.5")
            assert video_state(shown, "output")["ready"] >= 2  # HAVE_CURRENT_DATA: frames decoded and shown
            shown.evaluate("document.getElementById('output').pause()")
            # AND its download link gives the rendered video: every frame of the clip, at its size and length
            link = shown.get_by_role("link", name="Download the output")
            expect(link).to_be_visible()
            answer = shown.request.get(link.get_attribute("href") or "")
            assert answer.ok, answer.status
            # (saved, not opened in the browser's player: S3 answers the link as an attachment, which the
            # page's own <video> above plays all the same)
            assert answer.headers.get("content-disposition", "").startswith("attachment; filename="), answer.headers
            downloaded = tmp_path / "downloaded.mp4"
            downloaded.write_bytes(answer.body())
            info, frames = decode_all(downloaded)
            assert (info.width, info.height, info.fps) == (320, 240, Fraction(FPS)), info
            assert info.frame_count == len(frames) == SECONDS * FPS, (info.frame_count, len(frames))
            assert abs(info.duration_s - SECONDS) < 1 / FPS, info.duration_s
    finally:
        stack.set_faults([])

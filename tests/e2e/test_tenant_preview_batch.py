"""A tenant previews frames before the run, starts a batch, pages through its items and plays an output.

Playwright drives Debian's Chromium on the local stack as a person would, in the tenant page's New job
form: two source faces and three clips; the first clip plays in the browser's own video element, frames 12
and 5 are scrubbed to and picked, and a test render of them (POST /jobs with `frames`) shows each rendered
frame beside its original; an option changes, the old render is marked stale, the preview runs again; then
Start job runs the batch of three with the same settings, sending only the files the preview did not.
The batch's items are paged through (two a page), and a finished item's output plays in the page (its
duration and readiness read from the video element itself) and downloads through its link.

With FUSIONFLEET_SCREENSHOT_DIR set (docs/screenshots for the docs' pictures) the preview and the batch's
page are saved there as small PNGs.
"""

from __future__ import annotations

import re
from pathlib import Path

import cv2
import pytest
from playwright.sync_api import expect

from fleetctl.samples import grace_hopper, grace_hopper_path
from tests.e2e.conftest import Stack
from tests.e2e.helpers import tenant_page
from tests.support.browser import new_job_preview, save_screenshot, until, video_state
from tests.support.media import write_video

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]
SECONDS, FPS = 1.2, 25  # 30 frames a clip: 0–29
RENDER_MS = 400_000  # the classic engine on a loaded 2-core machine


def test_a_tenant_previews_a_frame_starts_a_batch_pages_its_items_and_plays_an_output(
    stack: Stack, browser: str, tmp_path: Path
) -> None:
    # GIVEN acme signed in on its page, two pictures of one face (FaceFusion averages its sources), three clips
    mirrored = tmp_path / "grace-mirrored.jpg"
    cv2.imwrite(str(mirrored), cv2.flip(grace_hopper(), 1))
    clips = [write_video(tmp_path / f"clip-{n}.mp4", seconds=SECONDS, fps=FPS, width=320, height=240) for n in range(3)]
    # WHEN acme chooses the three clips
    faces = [grace_hopper_path(), mirrored]
    with new_job_preview(tenant_page(stack, "acme"), faces, "classic", clips) as (shown, form, preview):
        # THEN the first plays in the browser's own player, its frames numbered at its rate
        expect(preview.get_by_role("status")).to_contain_text("Scrub clip-0.mp4 to a frame")
        scrub = preview.get_by_role("slider", name="Frame")
        expect(scrub).to_have_attribute("max", str(round(SECONDS * FPS) - 1))
        expect(preview.get_by_role("combobox", name="Target to preview")).to_have_value("0")
        # WHEN acme scrubs to frame 12 and picks it, then to frame 5 and picks it
        for frame in (12, 5):
            scrub.fill(str(frame))
            expect(preview.get_by_text(f"frame {frame} of 0–29 · 25.00 fps")).to_be_visible()
            assert frame / FPS <= video_state(shown, "try-video")["time"] < (frame + 1) / FPS
            preview.get_by_role("button", name="Pick this frame").click()
            expect(preview.get_by_role("img", name=f"frame {frame} original")).to_be_visible()
        expect(preview.get_by_role("list", name="Picked frames").get_by_role("listitem")).to_have_count(2)
        # AND asks for their preview
        preview.get_by_role("button", name="Preview frames").click()
        expect(preview.get_by_role("status")).to_contain_text("Rendering frames 5, 12")
        # THEN each comes back rendered by the farm, at the clip's size, beside its original
        for frame in (5, 12):
            picture = preview.get_by_role("img", name=f"frame {frame} rendered")
            expect(picture).to_be_visible(timeout=RENDER_MS)
            assert picture.evaluate("image => [image.naturalWidth, image.naturalHeight]") == [320, 240]
        rendered = preview.get_by_role("img", name="frame 12 rendered")
        expect(preview.get_by_role("status")).to_contain_text("Rendered with the classic engine, FaceFusion's defaults")
        first = rendered.get_attribute("src")
        # WHEN acme changes an option THEN the render shown is marked as not the options' any more
        form.get_by_label(re.compile(r"^face swapper weight")).fill("0.8")
        expect(preview.get_by_role("status")).to_contain_text("The options changed since this preview")
        expect(preview.locator("figure.rendered.stale")).to_have_count(2)
        # WHEN acme previews again THEN the frame is rendered anew with the option
        preview.get_by_role("button", name="Preview frames").click()
        expect(preview.get_by_role("status")).to_contain_text("face swapper weight 0.8", timeout=RENDER_MS)
        expect(rendered).not_to_have_attribute("src", first or "")
        expect(preview.locator("figure.rendered.stale")).to_have_count(0)
        # AND the second preview sent no file again: the faces and the clip are named by their keys
        uploads = form.get_by_role("list", name="Uploads").get_by_role("listitem")
        expect(uploads).to_have_count(0)
        save_screenshot(form.screenshot(), "tenant-preview.png")
        # WHEN acme asks for a preview on an engine that would not apply the option THEN the API's reason
        form.get_by_label("Engine").select_option("copy")
        preview.get_by_role("button", name="Preview frames").click()
        refused = "options.face_swapper_weight: the copy engine does not apply it"
        expect(form.get_by_role("alert")).to_contain_text(refused)
        expect(preview.get_by_role("status")).to_contain_text("The preview was not rendered")
        form.get_by_label("Engine").select_option("classic")
        # WHEN acme starts the job: three targets, a batch, with the same engine and options
        form.get_by_role("button", name="Start job").click()
        # THEN only the files the preview had not sent are uploaded
        expect(uploads).to_have_count(2)
        expect(uploads).to_contain_text(["clip-1.mp4", "clip-2.mp4"])
        expect(shown).to_have_url(re.compile(r"/tenant/\?job="))
        job_id = shown.url.split("job=", 1)[1]
        job = shown.locator("#job")
        expect(job).to_have_attribute("data-job-id", job_id)
        # AND the batch runs to the end
        expect(job).to_have_attribute("data-state", "SUCCEEDED", timeout=RENDER_MS)
        # WHEN acme reads its items two a page THEN it pages through all three
        shown.goto(f"{shown.url}&items=2")
        items = shown.locator("#items tbody tr")
        # (a batch's output is its items': the first finished one is in the player, the batch has no link)
        expect(shown.locator("#output-caption")).to_have_text("item 0: clip-0.mp4")
        expect(shown.get_by_role("link", name="Download the output")).to_be_hidden()
        expect(items).to_have_count(2)
        expect(shown.get_by_text("items 0–1 of 3")).to_be_visible()
        expect(shown.get_by_role("button", name="Previous items")).to_be_disabled()
        shown.get_by_role("button", name="Next items").click()
        expect(items).to_have_count(1)
        expect(items).to_contain_text("clip-2.mp4")
        expect(shown.get_by_role("button", name="Next items")).to_be_disabled()
        # AND a finished item's output plays in the page: the video element has the whole clip
        shown.get_by_role("button", name="play item 2").click()
        expect(shown.locator("#output-caption")).to_have_text("item 2: clip-2.mp4")
        shown.wait_for_timeout(2500)  # the page's next poll keeps what acme chose
        expect(shown.locator("#output-caption")).to_have_text("item 2: clip-2.mp4")
        until(shown, "() => document.getElementById('output').readyState >= 1")
        played = video_state(shown, "output")
        assert played["width"] == 320 and abs(played["duration"] - SECONDS) < 0.2, played
        shown.evaluate("async () => { const v = document.getElementById('output'); v.muted = true; await v.play(); }")
        until(shown, "() => document.getElementById('output').currentTime > 0.2")
        assert video_state(shown, "output")["ready"] >= 2  # HAVE_CURRENT_DATA: frames decoded and shown
        # AND it downloads through its link
        link = items.get_by_role("link")
        download = shown.request.get(link.get_attribute("href") or "")
        assert download.ok and download.body()[4:8] == b"ftyp", download.status
        shown.evaluate("document.getElementById('output').pause()")
        shown.get_by_role("button", name="Previous items").click()
        expect(items).to_have_count(2)
        # (the batch's page from its title to its items, the output's player among them)
        top, end = job.bounding_box(), shown.locator("#items-box").bounding_box()
        assert top is not None and end is not None
        height = end["y"] + end["height"] - top["y"]
        save_screenshot(shown.screenshot(full_page=True, clip={**top, "height": height}), "tenant-batch.png")

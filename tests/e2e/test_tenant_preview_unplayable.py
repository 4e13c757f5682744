"""A target the browser cannot play is still previewed: its frames are picked by number and the farm shows them.

Debian's Chromium plays no HEVC, which the farm takes. Playwright drives the tenant page's New job form on
the local stack as a person would: with an HEVC clip in Matroska chosen, the preview says the browser does
not play it and offers a frame number instead of the player; frames 20 and 3 are picked by number, Show
originals has the farm show them as they are (a test render with the copy engine), and Preview frames
renders them with the form's engine beside them; a frame past the clip's end is refused with the farm's
reason, which names the clip's last frame.

With FUSIONFLEET_SCREENSHOT_DIR set (docs/screenshots) the previewed frames are saved there as a small PNG.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from fleetctl.local.supervisor import tenant_page_url
from fleetctl.samples import grace_hopper_path
from tests.e2e.conftest import Stack
from tests.e2e.helpers import api_token, api_url
from tests.support.browser import page, save_screenshot
from tests.support.media import ffmpeg, write_video

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]
SECONDS, FPS = 1.2, 25  # 30 frames: 0–29
RENDER_MS = 400_000  # the classic engine on a loaded 2-core machine
SIZE = [320, 240]


def test_a_target_the_browser_cannot_play_is_previewed_by_frame_number_with_the_farms_originals(
    stack: Stack, browser: str, tmp_path: Path
) -> None:
    # GIVEN acme signed in on its page, a face, and a clip in HEVC (Matroska), which Chromium does not play
    api, dashboard = api_url(stack), stack.state().dashboard_url
    assert dashboard is not None
    plain = write_video(tmp_path / "plain.mp4", seconds=SECONDS, fps=FPS, width=SIZE[0], height=SIZE[1])
    clip = tmp_path / "clip.mkv"
    ffmpeg("-i", str(plain), "-c:v", "libx265", "-x265-params", "log-level=none", "-c:a", "copy", str(clip))
    with page((1280, 900), timeout_ms=30_000) as shown:
        shown.on("console", lambda message: print(f"page: {message.type}: {message.text}"))  # shown on failure
        shown.goto(tenant_page_url(dashboard, api, api_token(stack, "acme")))
        shown.get_by_role("button", name="New job").click()
        form = shown.get_by_role("region", name="New job")
        expect(form.get_by_role("checkbox", name="face swapper")).to_be_checked()
        form.get_by_label("Source faces").set_input_files(grace_hopper_path())
        form.get_by_label("Engine").select_option("classic")
        # WHEN acme chooses the HEVC clip
        form.get_by_label("Targets").set_input_files(clip)
        # THEN the preview says this browser does not play it, and offers a frame number instead of the player
        preview = form.get_by_role("region", name="Preview")
        status = preview.get_by_role("status")
        expect(status).to_contain_text("type a frame number (from 0) and pick it")
        expect(status).to_contain_text("clip.mkv")
        expect(preview.get_by_role("slider", name="Frame")).to_be_hidden()
        expect(shown.locator("#try-video")).to_be_hidden()
        number = preview.get_by_role("spinbutton", name="Frame number")
        # WHEN acme picks frames 20 and 3 by number
        for frame in (20, 3):
            number.fill(str(frame))
            preview.get_by_role("button", name="Pick this frame").click()
            expect(preview.get_by_text(f"frame {frame} · original not shown yet")).to_be_visible()
        expect(preview.get_by_role("list", name="Picked frames").get_by_role("listitem")).to_have_count(2)
        # AND asks the farm for the originals
        preview.get_by_role("button", name="Show originals").click()
        # THEN each picked frame is shown as it is, at the clip's size
        for frame in (3, 20):
            original = preview.get_by_role("img", name=f"frame {frame} original")
            expect(original).to_be_visible(timeout=RENDER_MS)
            assert original.evaluate("image => [image.naturalWidth, image.naturalHeight]") == SIZE
        expect(status).to_contain_text("The picked frames as they are, read by the farm")
        # WHEN acme previews them THEN each is rendered with the classic engine beside its original
        preview.get_by_role("button", name="Preview frames").click()
        for frame in (3, 20):
            rendered = preview.get_by_role("img", name=f"frame {frame} rendered")
            expect(rendered).to_be_visible(timeout=RENDER_MS)
            assert rendered.evaluate("image => [image.naturalWidth, image.naturalHeight]") == SIZE
        expect(status).to_contain_text("Rendered with the classic engine, FaceFusion's defaults")
        save_screenshot(preview.screenshot(), "tenant-preview-by-number.png")
        # WHEN acme picks a frame past the clip's end and previews THEN the farm's reason names its last frame
        number.fill("40")
        preview.get_by_role("button", name="Pick this frame").click()
        preview.get_by_role("button", name="Preview frames").click()
        expect(status).to_contain_text("frames: 40 past the target's last frame (29)", timeout=RENDER_MS)

"""A target the browser cannot play is still previewed: from the farm's poster strip, or by frame number.

Debian's Chromium plays no HEVC, which the farm takes. Playwright drives the tenant page's New job form on
the local stack as a person would, with an HEVC clip in Matroska chosen:

- the preview says the browser does not play it and offers a poster strip and a frame number instead of the
  player; Show poster strip has the farm show 8 frames spread over the clip (a test render with the copy
  engine and `spread_frames`: only the farm reads the clip's length), first and last included, each the
  frame it is labelled (the clip's frames carry their number as a code of blocks, read back from each
  picture); a click on one picks it, the strip's picture as its original, and Preview frames renders it;
- frames 20 and 3 are picked by number, Show originals has the farm show them as they are, and Preview
  frames renders them with the form's engine beside them; a frame past the clip's end is refused with
  the farm's reason, which names the clip's last frame.

With FUSIONFLEET_SCREENSHOT_DIR set (docs/screenshots) the strip and the previewed frames are saved there as
small PNGs.
"""

from __future__ import annotations

import itertools
from contextlib import AbstractContextManager
from pathlib import Path

import cv2
import numpy as np
import pytest
from playwright.sync_api import Locator, Page, expect

from fleetctl.samples import grace_hopper_path, read_stamp
from tests.e2e.conftest import Stack
from tests.e2e.helpers import tenant_page
from tests.support.browser import new_job_preview, save_screenshot
from tests.support.media import ffmpeg, write_video

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]
SECONDS, FPS = 1.2, 25  # 30 frames: 0–29
RENDER_MS = 400_000  # the classic engine on a loaded 2-core machine
SIZE = [320, 240]
STRIP = 8  # the page's poster strip: frames spread over the clip
LAST = round(SECONDS * FPS) - 1


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """30 frames in HEVC (Matroska), each with its number drawn as a code of blocks (fleetctl.samples.stamp)."""
    width, height = SIZE
    folder = tmp_path_factory.mktemp("hevc")
    plain = write_video(folder / "plain.mp4", seconds=SECONDS, fps=FPS, width=width, height=height, with_stamp=True)
    clip = folder / "clip.mkv"
    ffmpeg("-i", str(plain), "-c:v", "libx265", "-x265-params", "log-level=none", "-c:a", "copy", str(clip))
    return clip


def acme_choosing(stack: Stack, engine: str, clip: Path) -> AbstractContextManager[tuple[Page, Locator, Locator]]:
    """acme signed in on its page, a face and `engine` chosen, choosing `clip`: the page, the form, its Preview."""
    return new_job_preview(tenant_page(stack, "acme"), [grace_hopper_path()], engine, [clip])


def frame_shown(shown: Page, image: Locator) -> int:
    """The frame number coded in the picture an <img> shows, fetched through its own link."""
    answer = shown.request.get(image.get_attribute("src") or "")
    assert answer.ok, answer.status
    decoded = cv2.imdecode(np.frombuffer(answer.body(), np.uint8), cv2.IMREAD_COLOR)
    assert decoded is not None and [decoded.shape[1], decoded.shape[0]] == SIZE, "not a picture of the clip's size"
    return read_stamp(np.asarray(decoded, np.uint8))


def test_a_target_the_browser_cannot_play_is_picked_from_the_farms_poster_strip(
    stack: Stack, browser: str, clip: Path
) -> None:
    # GIVEN acme signed in on its page, a face, the copy engine (frames out = frames in)
    # WHEN acme chooses an HEVC clip THEN the preview offers the farm's poster strip instead of the player
    with acme_choosing(stack, "copy", clip) as (shown, _form, preview):
        status = preview.get_by_role("status")
        expect(status).to_contain_text("Show poster strip has the farm show 8 frames spread over it")
        expect(shown.locator("#try-video")).to_be_hidden()
        strip = preview.get_by_role("list", name="Poster strip")
        expect(strip).to_be_hidden()
        # WHEN acme asks for the strip
        preview.get_by_role("button", name="Show poster strip").click()
        # THEN 8 frames spread evenly over the clip are shown, in order, its first and last included
        posters = strip.get_by_role("button")
        expect(posters).to_have_count(STRIP, timeout=RENDER_MS)
        labels = [posters.nth(index).get_attribute("aria-label") or "" for index in range(STRIP)]
        assert all(label.startswith("pick frame ") for label in labels), labels
        frames = [int(label.removeprefix("pick frame ")) for label in labels]
        gaps = [later - earlier for earlier, later in itertools.pairwise(frames)]
        assert frames[0] == 0 and frames[-1] == LAST and min(gaps) >= 1 and max(gaps) - min(gaps) <= 1, frames
        expect(status).to_contain_text("click one to pick it")
        panel, row = shown.locator("#new-job-panel").bounding_box(), strip.bounding_box()
        assert panel and row and row["x"] + row["width"] <= panel["x"] + panel["width"], "the strip spills out"
        # AND each thumbnail is the frame it is labelled (the number coded in its pixels): all differ
        for frame in frames:
            poster = strip.get_by_role("img", name=f"frame {frame} poster")
            expect(poster).to_be_visible()
            assert frame_shown(shown, poster) == frame
        # WHEN acme clicks a frame in the middle THEN it is picked, the strip's picture of it its original
        chosen = frames[STRIP // 2]
        strip.get_by_role("button", name=f"pick frame {chosen}").click()
        picked = preview.get_by_role("list", name="Picked frames").get_by_role("listitem")
        expect(picked).to_have_count(1)
        original = preview.get_by_role("img", name=f"frame {chosen} original")
        expect(original).to_be_visible()
        assert frame_shown(shown, original) == chosen
        # AND previewing renders that frame (the copy engine's render is the frame itself)
        preview.get_by_role("button", name="Preview frames").click()
        rendered = preview.get_by_role("img", name=f"frame {chosen} rendered")
        expect(rendered).to_be_visible(timeout=RENDER_MS)
        assert frame_shown(shown, rendered) == chosen
        expect(status).to_contain_text("Rendered with the copy engine")
        save_screenshot(preview.screenshot(), "tenant-preview-strip.png")


def test_a_target_the_browser_cannot_play_is_previewed_by_frame_number_with_the_farms_originals(
    stack: Stack, browser: str, clip: Path
) -> None:
    # GIVEN acme signed in on its page and a face
    # WHEN acme chooses a clip in HEVC (Matroska), which Chromium does not play
    with acme_choosing(stack, "classic", clip) as (shown, _form, preview):
        # THEN the preview says this browser does not play it, and offers a frame number instead of the player
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

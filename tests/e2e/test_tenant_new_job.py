"""A tenant starts a job from its page (the local stack's /tenant/): the New job form, clicked through.

Playwright drives Debian's Chromium as a person would: choose a face and a clip, see the processors and
their options as the API's GET /options describes them (FaceFusion's catalogue), start the job; each
file goes straight to the bucket with the API's presigned POST (its progress shown per file), the job
starts and opens in the job page, where it runs to SUCCEEDED. A file over the upload limit is refused
with the reason before anything is sent.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from fleetctl.local.supervisor import tenant_page_url
from fleetctl.samples import grace_hopper_path
from tests.e2e.conftest import Stack
from tests.e2e.helpers import api_token, api_url
from tests.support.browser import page
from tests.support.media import write_video

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
GIB = 1024**3


def test_a_tenant_starts_a_job_from_its_page_and_it_opens_in_the_job_page(
    stack: Stack, browser: str, tmp_path: Path
) -> None:
    # GIVEN acme signed in on its page, a face, a short clip, and a file past the 2 GiB upload limit
    api, dashboard = api_url(stack), stack.state().dashboard_url
    assert dashboard is not None
    clip = write_video(tmp_path / "clip.mp4", seconds=4, fps=25, width=320, height=240)
    huge = tmp_path / "huge.mp4"
    with huge.open("wb") as sparse:  # its size is all the page reads of it: no disk spent
        sparse.truncate(3 * GIB)
    with page((1400, 900), timeout_ms=30_000) as shown:
        shown.goto(tenant_page_url(dashboard, api, api_token(stack, "acme")))
        # WHEN acme opens the form
        shown.get_by_role("button", name="New job").click()
        form = shown.get_by_role("region", name="New job")
        # THEN it offers FaceFusion's processors, face swapper chosen, with that processor's options
        expect(form.get_by_role("checkbox", name="face swapper")).to_be_checked()
        expect(form.get_by_role("group", name="face swapper options")).to_be_visible()
        expect(form.get_by_role("combobox", name="face swapper model")).to_have_value("hyperswap_1a_256")
        form.get_by_role("checkbox", name="face enhancer").check()
        expect(form.get_by_role("group", name="face enhancer options")).to_be_visible()
        form.get_by_role("checkbox", name="face enhancer").uncheck()
        # WHEN acme chooses a target over the limit THEN it is refused with the reason, nothing sent
        form.get_by_label("Source faces").set_input_files(grace_hopper_path())
        form.get_by_label("Targets").set_input_files(huge)
        form.get_by_label("Engine").select_option("copy")
        form.get_by_role("button", name="Start job").click()
        expect(form.get_by_role("alert")).to_contain_text("'huge.mp4' is 3221225472 bytes, over the upload limit")
        expect(form.get_by_role("list", name="Uploads").get_by_role("listitem")).to_have_count(0)
        # WHEN acme chooses the clip instead and starts the job
        form.get_by_label("Targets").set_input_files(clip)
        form.get_by_role("button", name="Start job").click()
        # THEN each file was uploaded, its progress full
        for name, path in (("grace_hopper.jpg", grace_hopper_path()), ("clip.mp4", clip)):
            bar = form.get_by_role("progressbar", name=f"upload of {name}")
            expect(bar).to_have_attribute("value", str(path.stat().st_size))
        # AND the job opened in the job page, where it runs to the end
        expect(shown).to_have_url(re.compile(r"/tenant/\?job="))
        job_id = shown.url.split("job=", 1)[1]
        job = shown.locator("#job")
        expect(job).to_have_attribute("data-job-id", job_id)
        expect(job).to_have_attribute("data-state", "SUCCEEDED", timeout=300_000)
        expect(form.get_by_role("alert")).to_be_hidden()

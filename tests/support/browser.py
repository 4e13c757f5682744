"""Headless Chromium (Debian's `chromium` package) for browser tests: the DOM after the page's scripts ran,
and screenshots. Each call is a fresh browser with a throwaway profile, bounded by a timeout. `page` drives
it with Playwright, for tests that read as the steps a person takes (`get_by_role`, `get_by_label`)."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from PIL import Image
from playwright.sync_api import Locator, Page, expect, sync_playwright

# A folder for the docs' pictures (docs/screenshots): the browser tests save their screenshots there only
# when it is set (taken with the test run alone, so the pictures show one test's jobs).
ENV_SCREENSHOT_DIR = "FUSIONFLEET_SCREENSHOT_DIR"

FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
)  # fmt: skip


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _run(url: str, action: list[str], budget_ms: int, timeout_s: float) -> subprocess.CompletedProcess[str]:
    browser = chromium()
    if browser is None:
        raise FileNotFoundError("chromium is not installed (apt-get install -y chromium)")
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        return subprocess.run(
            [browser, *FLAGS, f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}", *action, url],
            capture_output=True, text=True, timeout=timeout_s, check=True,
        )  # fmt: skip


def dump_dom(url: str, budget_ms: int = 4000, timeout_s: float = 90) -> str:
    """The document once the page's scripts ran for `budget_ms` of virtual time (fetches included)."""
    return _run(url, ["--dump-dom"], budget_ms, timeout_s).stdout


def screenshot(url: str, path: Path, size: tuple[int, int] = (1400, 900), budget_ms: int = 4000) -> Path:
    _run(url, [f"--window-size={size[0]},{size[1]}", f"--screenshot={path}"], budget_ms, 90)
    return path


@contextmanager
def page(size: tuple[int, int] = (1400, 900), timeout_ms: float = 15_000) -> Iterator[Page]:
    """A Playwright page in Debian's Chromium (Playwright's own browser download cannot work here), in a
    fresh browser of the window's `size`; its locators and assertions wait up to `timeout_ms`."""
    browser = chromium()
    if browser is None:
        raise FileNotFoundError("chromium is not installed (apt-get install -y chromium)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=browser, args=["--no-sandbox"])
        try:
            opened = launched.new_page(viewport={"width": size[0], "height": size[1]})
            opened.set_default_timeout(timeout_ms)
            yield opened
        finally:
            launched.close()


def open_new_job(shown: Page, address: str, sources: Sequence[Path], engine: str) -> Locator:
    """The tenant page at `address` (its token in the fragment) with its New job form open as it opens
    (FaceFusion's face swapper chosen), `sources` chosen as the faces and `engine` as the engine; the page's
    console printed (pytest shows it when a test fails). Returns the form."""
    shown.on("console", lambda message: print(f"page: {message.type}: {message.text}"))
    shown.goto(address)
    shown.get_by_role("button", name="New job").click()
    form = shown.get_by_role("region", name="New job")
    expect(form.get_by_role("checkbox", name="face swapper")).to_be_checked()
    form.get_by_label("Source faces").set_input_files(list(sources))
    form.get_by_label("Engine").select_option(engine)
    return form


@contextmanager
def new_job_preview(
    address: str, sources: Sequence[Path], engine: str, targets: Sequence[Path]
) -> Iterator[tuple[Page, Locator, Locator]]:
    """A 1280×900 page (its assertions waiting up to 30 s) on the tenant page at `address`, its New job form
    open (open_new_job) and `targets` chosen: the page, the form and the form's Preview region."""
    with page((1280, 900), timeout_ms=30_000) as shown:
        form = open_new_job(shown, address, sources, engine)
        form.get_by_label("Targets").set_input_files(list(targets))
        yield shown, form, form.get_by_role("region", name="Preview")


def save_screenshot(png: bytes, name: str) -> Path | None:
    """A screenshot under FUSIONFLEET_SCREENSHOT_DIR as a PNG of at most 128 colours (a small file to
    commit); None when the variable is not set."""
    folder = os.environ.get(ENV_SCREENSHOT_DIR)
    if not folder:
        return None
    image = Image.open(io.BytesIO(png)).convert("RGB")
    path = Path(folder) / name
    image.quantize(colors=128, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    return path


def until(page_: Page, script: str, timeout_s: float = 30) -> None:
    """Until `script` (a function of no arguments) is true in the page (the pages' policy forbids the
    string evaluation `wait_for_function` does)."""
    deadline = time.monotonic() + timeout_s
    while not page_.evaluate(script):
        assert time.monotonic() < deadline, f"never true: {script}"
        page_.wait_for_timeout(200)


def video_state(page_: Page, element_id: str) -> dict[str, float]:
    """What a video element holds: readyState, duration, currentTime, videoWidth."""
    return dict(page_.evaluate(
        "id => { const v = document.getElementById(id);"
        " return {ready: v.readyState, duration: v.duration, time: v.currentTime, width: v.videoWidth}; }",
        element_id,
    ))  # fmt: skip


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    text: str = ""


class Elements(HTMLParser):
    """Every element with its attributes and the text directly inside it, in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[Element] = []
        self._open: list[Element] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {name: value or "" for name, value in attrs})
        self.found.append(element)
        if tag not in ("meta", "link", "img", "br", "input"):
            self._open.append(element)

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            if self._open.pop().tag == tag:
                break

    def handle_data(self, data: str) -> None:
        if self._open:
            self._open[-1].text += data


def elements(html: str) -> list[Element]:
    parser = Elements()
    parser.feed(html)
    parser.close()
    return parser.found

"""Test renders (`fusionfleet try`) on the local stack, over HTTP: a few frames of a multi-segment clip
rendered by the classic engine are the full render's same frames; the HTTP API gives a link per frame;
bad requests are told. The judge decodes with OpenCV, not the farm's code."""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt
import pytest

from fleetctl.samples import grace_hopper_path, write_video
from fusionfleet import layout
from fusionfleet.jobs.plan import Segment
from tests.e2e.conftest import Stack
from tests.e2e.helpers import api_token, api_url, drop_job, wait_until
from tests.support.browser import dump_dom

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

Image = npt.NDArray[Any]  # as OpenCV reads it: 8-bit BGR
# The full render is x264 at quality 98 (CRF 1) in 4:2:0 with the farm's colour conversion and tags: the
# test render's PNG is the engine's frame before that path, so the two agree to within it, and its loss
# is the same on the swapped face as on the untouched background (quality 100, CRF 0, is not possible:
# x264's High profile has no lossless mode). The test prints what it measured.
MIN_PSNR_DB = 38.0  # the whole picture against the full render's same frame
MIN_FACE_PSNR_DB = 35.0  # the swapped face alone
NEIGHBOUR_MARGIN_DB = 6.0  # the face matches its own frame of the full render this much better than a neighbour


def psnr(a: Image, b: Image) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)


def opencv_frames(path: Path) -> list[Image]:
    capture = cv2.VideoCapture(str(path))
    frames = []
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        frames.append(frame)
    capture.release()
    return frames


def job_of(result: str) -> str:
    return result.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # 6 s at 25 fps: two segments, the plan's are at most 5 s each (fusionfleet.jobs.sizing).
    return write_video(tmp_path_factory.mktemp("trial") / "clip.mp4", seconds=6, fps=25, width=320, height=180)


def test_a_test_renders_frames_are_the_full_renders_frames(stack: Stack, clip: Path, tmp_path: Path) -> None:
    face = str(grace_hopper_path())
    common = ("--source", face, "--target", str(clip), "--engine", "classic", "--output-video-quality", "98")
    # GIVEN the whole clip rendered by the classic engine, in several segments
    full = stack.cli("submit", *common, "--priority", "high", "--wait", "--output", str(tmp_path / "full.mp4"))
    assert full.returncode == 0, full.stderr
    s3, work = stack.client("s3"), stack.resources.work_bucket
    raw = s3.get_object(Bucket=work, Key=layout.plan_key(job_of(full.stdout)))["Body"].read()
    plan = [Segment.from_dict(item) for item in json.loads(raw)]
    assert len(plan) >= 2, plan
    # WHEN a test render asks for a frame of the first segment, the last frame of that segment and a frame
    # just after the second segment's start (its engine warms up on the lead-in before the cut)
    frames = [3, plan[0].end_frame - 1, plan[1].start_frame + 2]
    out = tmp_path / "pictures"
    trial = stack.cli("try", *common, "--frames", ",".join(map(str, frames)), "--output-dir", str(out))
    assert trial.returncode == 0, trial.stderr
    # THEN one PNG per frame, named by its number, each the full render's same frame (and no other)
    rendered = opencv_frames(tmp_path / "full.mp4")
    target = opencv_frames(clip)
    assert len(rendered) == len(target) == 150
    for frame in frames:
        picture = cv2.imread(str(out / f"frame-{frame:06d}.png"))
        assert picture is not None and picture.shape == (180, 320, 3), frame
        face = np.abs(picture.astype(np.int16) - target[frame].astype(np.int16)).max(axis=2) > 12  # what was swapped
        same, same_face = psnr(picture, rendered[frame]), psnr(picture[face], rendered[frame][face])
        others = [psnr(picture[face], rendered[o][face]) for o in (frame - 1, frame + 1) if 0 <= o < len(rendered)]
        print(f"frame {frame}: {same:.2f} dB, the face ({int(face.sum())} px) {same_face:.2f} dB from the full "
              f"render's same frame; the face {max(others):.2f} dB at best from a neighbour")  # fmt: skip
        assert face.sum() > 500, frame  # a face was swapped
        assert same >= MIN_PSNR_DB and same_face >= MIN_FACE_PSNR_DB, (frame, same, same_face)
        assert same_face >= max(others) + NEIGHBOUR_MARGIN_DB, (frame, same_face, others)


def test_a_spread_test_render_fetches_the_frames_the_farm_chose(stack: Stack, clip: Path, tmp_path: Path) -> None:
    # GIVEN a clip of 150 frames, and a test render that names no frames but asks for 4 spread over it,
    # submitted without waiting for it
    out = tmp_path / "strip"
    trial = stack.cli(
        "try", "--source", str(grace_hopper_path()), "--target", str(clip), "--engine", "copy", "--spread", "4",
        "--no-wait",
    )  # fmt: skip
    assert trial.returncode == 0, trial.stderr
    job = trial.stdout.strip().splitlines()[-1]
    # WHEN `wait` follows it later, into a folder (a test render's pictures are no one file: -o is refused)
    refused = stack.cli("wait", job, "-o", str(tmp_path / "one.png"))
    assert refused.returncode == 2 and "is a test render: name a folder with --output-dir" in refused.stderr
    waited = stack.cli("wait", job, "--output-dir", str(out))
    assert waited.returncode == 0, waited.stderr
    # THEN it fetched the frames the slicer chose: first and last included, evenly spread, each the
    # target's own frame (the copy engine returns its input) and not its neighbour
    assert sorted(path.name for path in out.iterdir()) == [f"frame-{f:06d}.png" for f in (0, 50, 99, 149)]
    # AND `download` fetches the same pictures again, as `try` names them
    again = tmp_path / "again"
    assert stack.cli("download", job, "--output-dir", str(again)).returncode == 0
    assert sorted(path.name for path in again.iterdir()) == sorted(path.name for path in out.iterdir())
    target = opencv_frames(clip)
    for frame in (0, 50, 99, 149):
        picture = cv2.imread(str(out / f"frame-{frame:06d}.png"))
        assert picture is not None and psnr(picture, target[frame]) >= MIN_PSNR_DB, frame
        neighbour = target[frame - 1 if frame else frame + 1]
        assert psnr(picture, target[frame]) > psnr(picture, neighbour) + NEIGHBOUR_MARGIN_DB, frame


@pytest.mark.long  # `make e2e-long`: the API's wiring, beside make test's slice (the CLI's, above)
def test_a_test_render_through_the_api_gives_a_link_per_frame(stack: Stack, clip: Path, tmp_path: Path) -> None:
    token, url = api_token(stack, "acme"), api_url(stack)
    out = tmp_path / "api-pictures"
    trial = stack.cli(
        "try", "--api", url, "--token", token, "--source", str(grace_hopper_path()), "--target", str(clip),
        "--engine", "copy", "--frames", "149,0,75", "--output-dir", str(out),
    )  # fmt: skip
    assert trial.returncode == 0, trial.stderr
    target = opencv_frames(clip)
    for frame in (0, 75, 149):
        picture = cv2.imread(str(out / f"frame-{frame:06d}.png"))
        # The copy engine returns its input: the picture is the target's frame, losslessly.
        assert picture is not None and psnr(picture, target[frame]) >= MIN_PSNR_DB, frame


def _dashboard(url: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{url.rstrip('/')}{path}", data=data, method="POST" if data else "GET")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
            return response.status, json.loads(raw) if response.headers["Content-Type"] == "application/json" else raw
    except urllib.error.HTTPError as error:
        return error.code, None


@pytest.mark.long  # `make e2e-long`
def test_the_dashboard_starts_a_test_render_of_a_job_and_shows_its_pictures(
    stack: Stack, clip: Path, browser: str
) -> None:
    url = stack.state().dashboard_url
    assert url is not None
    # GIVEN a job the slicer has read
    job = drop_job(stack, "trial-dashboard", clip)
    assert wait_until(lambda: _dashboard(url, f"/api/jobs/{job}")[0] == 200, 120)
    # WHEN the operator asks for a test render of two of its frames (what the page's Try button sends)
    status, answer = _dashboard(url, f"/api/jobs/{job}/try", {"frames": [0, 120]})
    assert status == 200, answer
    trial = answer["message"].split()[2]
    assert answer["message"] == f"test render {trial} of frame(s) 0, 120 started"

    def pictures() -> list[str]:
        found = _dashboard(url, f"/api/jobs/{trial}")
        return list(found[1]["pictures"]) if found[0] == 200 else []

    # THEN it runs with the job's settings and its page lists both pictures, each the target's frame
    assert wait_until(lambda: len(pictures()) == 2, 180)
    assert pictures() == [f"/api/jobs/{trial}/frames/0", f"/api/jobs/{trial}/frames/120"]
    status, png = _dashboard(url, f"/api/jobs/{trial}/frames/120")
    picture = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR)
    assert status == 200 and picture is not None
    assert psnr(picture, opencv_frames(clip)[120]) >= MIN_PSNR_DB  # the copy engine returns its input
    # AND the page shows them
    assert f'src="/api/jobs/{trial}/frames/120"' in dump_dom(f"{url}?job={trial}")


def test_a_frame_past_the_end_is_rejected_by_name(stack: Stack, clip: Path, tmp_path: Path) -> None:
    # (an image target and frames that are no numbers are refused before any upload: tests/unit/test_trial_command.py)
    past = stack.cli("try", "--source", str(grace_hopper_path()), "--target", str(clip), "--engine", "copy",
                     "--frames", "0,150", "--output-dir", str(tmp_path))  # fmt: skip
    assert past.returncode == 3 and "frames: 150 past the target's last frame (149)" in past.stderr, past.stderr
    assert not list(tmp_path.glob("*.png"))

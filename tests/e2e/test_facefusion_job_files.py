"""A job file FaceFusion 3.8.1's own job commands wrote, run on the local stack with `fusionfleet submit
--facefusion-job JOB.json --wait`: a step, a remix of it (`job-remix-step`: with options and a trim of its
own, the two one job of chained passes) and a step writing the first
step's output too (which job-run joins after it), each a farm job on the warm FaceFusion engine (the
harness's stand-in models), each output written where its step says. Through the tenant HTTP API
(`--api`) a remix chain is the same one job of chained passes.

Skipped with the reason where the harness cannot run (no FaceFusion checkout or no `.venv-facefusion`),
failed in CI.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Stack
from tests.e2e.helpers import api_token, api_url, facefusion_stack
from tests.support import facefusion_harness as harness
from tests.support.facefusion_jobs import clip, drafted, face, job_command
from tests.support.media import decode_all

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(900),
    pytest.mark.usefixtures("facefusion_harness"),  # skipped where the harness is missing, failed in CI
]

FPS, FRAMES = 25, 50


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> harness.Harness:
    return harness.prepare(tmp_path_factory.mktemp("facefusion-home"))  # (skips first where it cannot run)


@pytest.fixture(scope="module")
def farm(home: harness.Harness, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A local stack of its own whose worker runs the harness's FaceFusion."""
    with facefusion_stack(home, tmp_path_factory.mktemp("job-file-stack"), 1) as stack:
        yield stack


def test_a_job_file_with_a_remix_and_a_join_gives_each_output_where_it_says(
    home: harness.Harness, farm: Stack, tmp_path: Path
) -> None:
    # GIVEN FaceFusion's own job: step 0 renders frames 10-49 of a 2 s clip; step 1 remixes step 0's output,
    # enhancing too, from its frame 20 (so 20 frames: from the clip itself it would be 30): options of its own
    # and a trim of the trimmed video, so one job of two passes on the clip's frames 30-49
    source, target, out, jobs = face(tmp_path), clip(tmp_path, FRAMES, FPS), tmp_path / "out", tmp_path / "jobs"
    job_command(home, jobs, "job-create", "remixed")
    job_command(home, jobs, "job-add-step", "remixed", "-s", str(source), "-t", str(target),
                "-o", str(out / "first.mp4"), "--trim-frame-start", "10", "--trim-frame-end", "50")  # fmt: skip
    job_command(home, jobs, "job-remix-step", "remixed", "0", "-s", str(source), "-o", str(out / "second.mp4"),
                "--processors", "face_swapper", "face_enhancer", "--trim-frame-start", "20")  # fmt: skip
    # AND step 2 renders frames 0-9 to step 0's output as well: job-run joins it after step 0's 40 frames
    job_command(home, jobs, "job-add-step", "remixed", "-s", str(source), "-t", str(target),
                "-o", str(out / "first.mp4"), "--trim-frame-end", "10")  # fmt: skip
    # WHEN the file is submitted to the farm and waited for
    done = farm.cli("submit", "--facefusion-job", str(drafted(jobs, "remixed")), "--wait", "--priority", "high")
    # THEN every step succeeds, one job each, their ids one a line in step order
    assert done.returncode == 0, done.stderr + farm.logs()
    ids = done.stdout.split()
    assert len(ids) == 3 and all(job.startswith("remixed-") for job in ids), done.stdout
    assert "step 1: job" in done.stderr and "steps 0, 1 in passes" in done.stderr, done.stderr
    assert f"steps 0, 2 joined → {out / 'first.mp4'}" in done.stderr, done.stderr
    # AND each output is where its steps said, frame-exact and timed as FaceFusion's job-run would give it:
    # step 0's 40 frames and step 2's 10 joined; the remix made from step 0's own 40 (20 from its frame 20)
    first, _ = decode_all(out / "first.mp4")
    assert first.frame_count == 50 and abs(first.duration_s - 50 / FPS) <= 1 / FPS, first
    second, _ = decode_all(out / "second.mp4")
    assert second.frame_count == 20 and abs(second.duration_s - 20 / FPS) <= 1 / FPS, second
    assert sorted(path.name for path in out.iterdir()) == ["first.mp4", "second.mp4"]  # no step files left
    # AND each step is a job like any other: `status` reads it SUCCEEDED
    for job in ids:
        status = farm.cli("status", job)
        assert status.returncode == 0 and "SUCCEEDED" in status.stdout, status.stdout + status.stderr


def test_a_remix_chain_through_the_tenant_api_is_one_job_of_passes(
    home: harness.Harness, farm: Stack, tmp_path: Path
) -> None:
    # GIVEN FaceFusion's own job: step 0 swaps a short clip, step 1 remixes step 0's output
    frames = 10
    source, target, out, jobs = face(tmp_path), clip(tmp_path, frames, FPS), tmp_path / "out", tmp_path / "jobs"
    job_command(home, jobs, "job-create", "chained")
    job_command(home, jobs, "job-add-step", "chained", "-s", str(source), "-t", str(target), "-o", str(out / "a.mp4"))
    job_command(home, jobs, "job-remix-step", "chained", "0", "-s", str(source), "-o", str(out / "b.mp4"))
    # WHEN a tenant submits it through the API and waits
    api = ["--api", api_url(farm), "--token", api_token(farm, "acme")]
    done = farm.cli("submit", "--facefusion-job", str(drafted(jobs, "chained")), "--wait", *api)
    # THEN the remix is one job of two passes on the clip, submitted with step 0 (no intermediate encode)
    assert done.returncode == 0, done.stderr + farm.logs()
    assert len(done.stdout.split()) == 2 and "steps 0, 1 in passes" in done.stderr, done.stdout + done.stderr
    assert "remixing step 0's output" not in done.stderr, done.stderr
    # AND each output is where its step said, every frame of the clip
    for name in ("a.mp4", "b.mp4"):
        video, _ = decode_all(out / name)
        assert video.frame_count == frames, (name, video)

"""Job files FaceFusion 3.8.1's own job commands wrote, read as the farm's jobs: `job-create`, `job-add-step`
and `job-remix-step` run in the harness's FaceFusion folder, then the file goes through what
`submit --facefusion-job` does before any upload (fusionfleet.facefusion.job_file, fleetctl.job_file_commands).

Needs FaceFusion's checkout and interpreter (tests/support/facefusion_harness.py); skipped with the reason
otherwise, failed in CI.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetctl.cli import main
from fleetctl.exits import Exit
from fleetctl.job_file_commands import _check_steps, _step_options
from fusionfleet.errors import JobRejected
from fusionfleet.facefusion.job_file import read_job_file
from tests.support import facefusion_harness as harness
from tests.support.facefusion_jobs import clip, drafted, face, job_command

pytestmark = [pytest.mark.timeout(600), pytest.mark.usefixtures("facefusion_harness")]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[harness.Harness, Path, Path, Path]:
    """The harness's FaceFusion folder, a jobs folder, a face and a 2 s clip."""
    home = harness.prepare(tmp_path_factory.mktemp("facefusion-home"))
    media = tmp_path_factory.mktemp("job-media")
    return home, tmp_path_factory.mktemp("jobs"), face(media), clip(media, 50)


def test_a_job_facefusion_wrote_is_a_job_per_step_with_its_remix_and_its_options(
    made: tuple[harness.Harness, Path, Path, Path], tmp_path: Path
) -> None:
    home, jobs, source, target = made
    out = tmp_path / "out"
    # GIVEN FaceFusion's own job: a step with a trim, a remix of it that also enhances, a step of its own
    job_command(home, jobs, "job-create", "three")
    job_command(home, jobs, "job-add-step", "three", "-s", str(source), "-t", str(target), "-o", str(out / "a.mp4"),
                "--trim-frame-start", "10", "--trim-frame-end", "50")  # fmt: skip
    job_command(home, jobs, "job-remix-step", "three", "0", "-s", str(source), "-o", str(out / "b.mp4"),
                "--processors", "face_swapper", "face_enhancer", "--trim-frame-start", "20")  # fmt: skip
    job_command(home, jobs, "job-add-step", "three", "-s", str(source), "-t", str(target), "-o", str(out / "c.mp4"),
                "--face-selector-mode", "many", "--output-video-quality", "90")  # fmt: skip
    # WHEN the farm reads the file FaceFusion wrote
    found = read_job_file(drafted(jobs, "three").read_bytes(), "three")
    # THEN each step is a job with its paths; the remix's target is step 0's file as job-run names it
    first, remix, third = found.steps
    assert (first.sources, first.target, first.output) == ((str(source),), str(target), str(out / "a.mp4"))
    assert (remix.remix_of, remix.target, remix.output) == (0, str(out / "a-three-0.mp4"), str(out / "b.mp4"))
    assert third.remix_of is None and third.target == str(target)
    # AND the options are the step's own (FaceFusion writes every one; the unset ones, null, are left out)
    assert (first.options["trim_frame_start"], first.options["trim_frame_end"]) == (10, 50)
    assert "trim_frame_end" not in remix.options and remix.options["processors"] == ["face_swapper", "face_enhancer"]
    assert (third.options["face_selector_mode"], third.options["output_video_quality"]) == ("many", 90)
    assert "output_video_fps" not in first.options and "face_selector_gender" not in first.options
    # AND the whole file passes the farm's checks for FaceFusion's engine, as any manifest's options do
    _check_steps(found, "facefusion", None)
    # AND for the built-in engine, the remix's enhancer is refused with the reason (FaceFusion's defaults of
    # what it does not apply are left out, so only that is said)
    with pytest.raises(JobRejected) as refused:
        _check_steps(found, "classic", None)
    assert refused.value.problems == (
        "steps[1]: options.processors: the classic engine runs only face_swapper, not face_enhancer; "
        "use the facefusion engine for the others",
    )
    assert _step_options(third, "classic") == {
        **{name: value for name, value in third.options.items() if name.startswith("output_")},
        "face_selector_mode": "many", "face_selector_order": "large-small", "face_swapper_weight": 0.5,
        "processors": ["face_swapper"], "reference_face_distance": 0.3, "reference_face_position": 0,
        "reference_frame_number": 0,
    }  # fmt: skip


def test_steps_facefusion_joins_into_one_output_are_a_join_that_needs_wait(
    made: tuple[harness.Harness, Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home, jobs, source, target = made
    # GIVEN two steps FaceFusion's job-run would join into one video (the same output_path)
    both = tmp_path / "both.mp4"
    job_command(home, jobs, "job-create", "joined")
    for trim in ("0", "25"):
        job_command(home, jobs, "job-add-step", "joined", "-s", str(source), "-t", str(target),
                    "-o", str(both), "--trim-frame-start", trim)  # fmt: skip
    # THEN the farm reads them as a join, in step order
    assert read_job_file(drafted(jobs, "joined").read_bytes(), "joined").joins == {str(both): (0, 1)}
    # AND without --wait it is refused before any upload (exit 2), saying the CLI joins the outputs
    assert main(["submit", "--facefusion-job", str(drafted(jobs, "joined"))]) == Exit.USAGE
    said = capsys.readouterr().err
    assert f"steps 0, 1 all write {both}: the CLI joins their outputs there once each has succeeded" in said
    assert said.rstrip().endswith("which needs --wait")


def test_a_missing_file_or_a_remix_without_wait_is_refused_before_any_upload(
    made: tuple[harness.Harness, Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home, jobs, source, target = made
    job_command(home, jobs, "job-create", "gone")
    gone = tmp_path / "gone.mp4"
    gone.write_bytes(target.read_bytes())
    job_command(home, jobs, "job-add-step", "gone", "-s", str(source), "-t", str(gone), "-o", str(tmp_path / "o.mp4"))
    gone.unlink()
    # GIVEN a file whose target is no longer there: THEN refused with the path (exit 2, a file not there)
    assert main(["submit", "--facefusion-job", str(drafted(jobs, "gone"))]) == Exit.USAGE
    assert f"steps[0].args.target_path: {gone} is not a file" in capsys.readouterr().err
    # GIVEN a remix step that scales the step before's output again (so not chained passes: a pass cannot change
    # the frames' size), without --wait: THEN refused, saying the farm submits it after the step it remixes
    job_command(home, jobs, "job-create", "remixed")
    job_command(
        home, jobs, "job-add-step", "remixed", "-s", str(source), "-t", str(target), "-o", str(tmp_path / "r.mp4")
    )
    job_command(home, jobs, "job-remix-step", "remixed", "0", "-s", str(source), "-o", str(tmp_path / "s.mp4"),
                "--output-video-scale", "0.5")  # fmt: skip
    assert main(["submit", "--facefusion-job", str(drafted(jobs, "remixed"))]) == Exit.USAGE
    assert "step 1 remixes step 0's output" in capsys.readouterr().err

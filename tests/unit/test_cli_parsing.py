"""The CLI's command line: FaceFusion's own names for paths and lists, flags the fleet owns refused in one
line, an unknown flag answered with the nearest one, and the exit statuses every job command lists."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

import pytest

from fleetctl import action_wait
from fleetctl.cli import build_parser, main
from fleetctl.client import Client
from fleetctl.exits import EPILOG, Exit, of_state
from fleetctl.parsing import FLEET_OWNED
from fleetctl.submit_commands import _report
from fusionfleet.facefusion.flags import collect_facefusion_options
from fusionfleet.facefusion.options import SYSTEM_OPTIONS
from fusionfleet.jobs.states import JobState
from fusionfleet.jobs.views import JobView
from tests.support.fakes import FakeOrchestrator, FakeStorage
from tests.support.farm import RESOURCES

# FaceFusion's `headless-run` arguments that are positional there (its job-* commands), so never flags.
POSITIONAL_IN_FACEFUSION = {"job_id", "job_status", "step_index"}


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one line a refused command line is answered with (exit status 2)."""
    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args(argv)
    assert stopped.value.code == Exit.USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "usage:" not in err, err
    return err.strip()


def test_a_headless_run_line_with_submit_wait_in_its_place_is_a_job() -> None:
    # GIVEN a FaceFusion user's line: `facefusion.py headless-run -s … -t … -o … --processors …`
    line = "submit --wait -s face.jpg other.jpg -t clip.mp4 -o out.mp4 --processors face_swapper face_enhancer"
    argv = shlex.split(line + " --face-selector-mode many --output-video-quality 90")
    # WHEN the CLI parses it THEN every path and list lands where the fleet's own flags put them
    args = build_parser().parse_args(argv)
    assert args.source == [Path("face.jpg"), Path("other.jpg")] and args.target == ["clip.mp4"]
    assert args.output == Path("out.mp4") and args.wait
    assert collect_facefusion_options(args) == {
        "processors": ["face_swapper", "face_enhancer"],
        "face_selector_mode": "many",
        "output_video_quality": 90,
    }


def test_facefusion_long_names_and_the_fleets_names_mix() -> None:
    argv = ["submit", "--source", "a.jpg", "--source-paths", "b.jpg", "c.wav", "--target-path", "clip.mp4"]
    argv += ["--target", "more.mp4", "--output-path", "out.mp4"]
    args = build_parser().parse_args(argv)
    assert args.source == [Path("a.jpg"), Path("b.jpg"), Path("c.wav")]
    assert args.target == ["clip.mp4", "more.mp4"] and args.output == Path("out.mp4")


def test_try_takes_facefusions_short_names_too() -> None:
    args = build_parser().parse_args(["try", "-s", "a.jpg", "b.jpg", "-t", "clip.mp4", "--frames", "0,12"])
    assert args.source == [Path("a.jpg"), Path("b.jpg")] and args.target == Path("clip.mp4")


def test_try_takes_frames_or_a_spread_never_both_and_never_neither(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["try", "-s", "a.jpg", "-t", "clip.mp4"]
    args = build_parser().parse_args([*base, "--spread", "8"])
    assert args.spread == 8 and args.frames is None
    for wrong, said in (
        (["--spread", "8", "--frames", "0"], "not allowed with argument"),
        ([], "one of the arguments --frames --spread is required"),
        (["--spread", "0"], "from 1 to"),
        (["--spread", "eight"], "from 1 to"),
    ):
        with pytest.raises(SystemExit) as stopped:
            build_parser().parse_args([*base, *wrong])
        assert stopped.value.code == 2 and said in capsys.readouterr().err, wrong


def test_every_facefusion_option_the_fleet_owns_has_its_reason() -> None:
    flags = {"--" + name.replace("_", "-") for name in set(SYSTEM_OPTIONS) - POSITIONAL_IN_FACEFUSION}
    # the paths are the job's own (FaceFusion's names for them are taken), the rest the fleet's
    assert set(FLEET_OWNED) == flags - {"--source-paths", "--target-path", "--output-path"}


@pytest.mark.parametrize("flag", sorted(FLEET_OWNED))
def test_a_flag_the_fleet_owns_is_refused_in_one_line_naming_it_and_why(
    flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    line = refused(["submit", "-s", "a.jpg", "-t", "b.mp4", flag, "x"], capsys)
    assert line == f"fusionfleet submit: error: {flag} is the fleet's to set, not a job's: {FLEET_OWNED[flag]}"


def test_a_fleet_owned_flag_is_named_before_a_missing_argument(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a line that also lacks its target WHEN parsed THEN the fleet-owned flag is what is said
    line = refused(["submit", "-s", "a.jpg", "--execution-providers=cuda"], capsys)
    assert "--execution-providers is the fleet's to set" in line and "each worker sets it for its own GPU" in line


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["submit", "--sorce", "a.jpg", "-t", "b.mp4"], "unknown flag --sorce; did you mean --source?"),
        (["submit", "-s", "a.jpg", "-t", "b.mp4", "--wiat"], "unknown flag --wiat; did you mean --wait?"),
        (["submit", "-s", "a", "-t", "b", "--face-selector-mdoe", "many"], "did you mean --face-selector-mode?"),
        (["status", "job", "--tenat", "acme"], "unknown flag --tenat; did you mean --tenant?"),
        (["submit", "-s", "a", "-t", "b", "--zzzzzz"], "unknown flag --zzzzzz"),
    ],
)
def test_an_unknown_flag_is_answered_with_the_nearest_right_one(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert said in refused(argv, capsys)


def test_a_missing_argument_is_one_line_naming_every_spelling(capsys: pytest.CaptureFixture[str]) -> None:
    # (-s and -t are required unless a FaceFusion job file names them: `submit --facefusion-job JOB.json`)
    assert main(["submit", "-t", "clip.mp4"]) == Exit.USAGE
    line = capsys.readouterr().err.strip()
    assert line == (
        "fusionfleet submit: error: the following arguments are required: -s/--source/--source-paths"
        " (or --facefusion-job JOB.json)"
    )


def test_flags_argparse_takes_are_not_refused() -> None:
    # a unique prefix of a flag, a short flag glued to its value, a negative number, values after `--`
    args = build_parser().parse_args(
        ["submit", "-sface.jpg", "-t", "b.mp4", "--prio", "high", "--face-detector-margin", "0", "5"]
    )
    assert args.source == [Path("face.jpg")] and args.priority == "high"
    assert build_parser().parse_args(["logs", "job", "--segment", "-1"]).segment == -1


def test_the_exit_statuses_are_distinct_and_every_job_command_lists_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert [int(code) for code in Exit] == [0, 1, 2, 3, 4]
    for code in Exit:
        assert f"  {int(code)}  " in EPILOG
    for command in ("submit", "try", "wait", "download", "status", "list", "cancel", "retry", "logs"):
        with pytest.raises(SystemExit) as stopped:
            build_parser().parse_args([command, "--help"])
        assert stopped.value.code == 0
        assert EPILOG in capsys.readouterr().out, command


def test_a_jobs_state_is_its_exit_status() -> None:
    assert of_state(JobState.SUCCEEDED) is Exit.DONE
    assert of_state(JobState.REJECTED) is Exit.REJECTED
    for state in (JobState.FAILED, JobState.CANCELLED, JobState.TIMED_OUT, JobState.ABORTED):
        assert of_state(state) is Exit.FAILED
    for state in (JobState.PENDING, JobState.WAITING, JobState.RUNNING):
        assert of_state(state) is Exit.DONE  # `status` of a job under way did what it was asked


def test_a_missing_file_is_a_usage_error_and_bad_options_a_rejection(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    face, clip = tmp_path / "face.jpg", tmp_path / "clip.mp4"
    assert main(["submit", "-s", str(face), "-t", str(clip)]) == Exit.USAGE
    assert capsys.readouterr().err.strip() == f"fusionfleet submit: error: {face} is not a file"
    face.write_bytes(b"face")
    clip.write_bytes(b"clip")
    # options the farm would refuse are refused before any upload, with the farm's reason
    assert main(["submit", "-s", str(face), "-t", str(clip), "--face-selector-mode", "several"]) == Exit.REJECTED
    assert "--face-selector-mode: 'several' is not one of many, one, reference" in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args(["--version"])
    out = capsys.readouterr().out
    assert stopped.value.code == 0 and out.startswith("fusionfleet ") and out.strip().endswith("(FaceFusion 3.8.1)")


def test_wait_and_download_take_a_job_and_where_its_result_goes() -> None:
    args = build_parser().parse_args(["wait", "job-1", "-o", "out.mp4", "--timeout", "90"])
    assert (args.job_id, args.output, args.timeout) == ("job-1", Path("out.mp4"), 90.0)
    args = build_parser().parse_args(["download", "job-1", "--output-dir", "outs"])
    assert (args.job_id, args.output, args.output_dir) == ("job-1", None, Path("outs"))
    assert build_parser().parse_args(["wait", "job-1"]).timeout == 3600.0


@pytest.mark.parametrize(
    ("state", "code", "said"),
    [
        (JobState.RUNNING, Exit.GAVE_UP, "gave up waiting: still RUNNING after 90 s; `fusionfleet wait job-1` goes on"),
        (JobState.REJECTED, Exit.REJECTED, "rejected: no face"),
        (JobState.FAILED, Exit.FAILED, "failed (FAILED): no face"),
        (JobState.CANCELLED, Exit.FAILED, "cancelled: no face"),
        (JobState.SUCCEEDED, Exit.FAILED, "failed (SUCCEEDED): no face"),  # a success without its result is none
    ],
)
def test_a_wait_ends_with_the_jobs_status(
    state: JobState, code: Exit, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    view = JobView("job-1", "clip", state, reason="no face")
    assert _report(Client(FakeStorage(), FakeOrchestrator(), RESOURCES), view, None, 90) is code
    assert capsys.readouterr().err.strip() == said


def test_cancel_and_retry_wait_when_asked_and_only_retry_downloads(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["retry", "job-1", "--wait", "-o", "out.mp4", "--timeout", "60"])
    assert (args.wait, args.output, args.timeout) == (True, Path("out.mp4"), 60.0)
    args = build_parser().parse_args(["cancel", "job-1", "--wait"])
    assert (args.wait, args.timeout) == (True, 3600.0)
    # a cancelled job has no result to download
    assert "unknown flag -o" in refused(["cancel", "job-1", "--wait", "-o", "out.mp4"], capsys)


@pytest.mark.parametrize(
    ("states", "code", "said"),
    [
        ([JobState.RUNNING, JobState.CANCELLED], Exit.DONE, "job-1: cancelled"),
        ([JobState.RUNNING, JobState.SUCCEEDED], Exit.FAILED, "job-1 ended SUCCEEDED before the cancel took hold"),
        ([JobState.RUNNING], Exit.GAVE_UP, "gave up waiting: job-1 has not ended after 0 s; the cancel goes on"),
    ],
)
def test_cancel_wait_ends_when_the_job_reads_cancelled(
    states: list[JobState], code: Exit, said: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a job whose state reads as `states` one after another (the last for ever)
    seen = iter(states)
    last = states[-1]

    def read() -> tuple[JobState, bool]:
        state = next(seen, last)
        return state, state.ended

    monkeypatch.setattr(action_wait, "_reader", lambda _args: read)
    monkeypatch.setattr(action_wait, "POLL_S", 0.0)
    args = build_parser().parse_args(["cancel", "job-1", "--wait", "--timeout", "0" if not last.ended else "60"])
    # WHEN the cancel is followed THEN its end is the status and the line
    assert action_wait.follow_up(args, lambda _: pytest.fail("a cancel downloads nothing")) is code
    assert said in capsys.readouterr().err


def test_retry_wait_is_wait_after_the_retry() -> None:
    args = build_parser().parse_args(["retry", "job-1", "--wait", "--output-dir", "outs"])
    waited: list[tuple[str, str, Path]] = []

    def wait(asked: argparse.Namespace) -> int:
        waited.append((asked.command, asked.job_id, asked.output_dir))
        return Exit.DONE

    assert action_wait.follow_up(args, wait) is Exit.DONE and waited == [("wait", "job-1", Path("outs"))]

"""`fusionfleet wait JOB` and `fusionfleet download JOB`: where the result goes and the status they end with."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetctl import submit_commands
from fleetctl.cli import build_parser, main
from fleetctl.exits import Exit
from fusionfleet.errors import FusionFleetError
from fusionfleet.jobs.states import JobState
from fusionfleet.jobs.views import JobResult, JobView

RESULT = JobResult("media", "outputs/clip-1.mp4", "s3://media/outputs/clip-1.mp4", frames=48, duration_s=2.0)


class StubClient:
    """The client's calls these commands make: the job's view, its test-render frames, the download of its result."""

    def __init__(self, view: JobView) -> None:
        self.view = view
        self.fetched: list[Path] = []

    def status(self, job_id: str) -> JobView:
        assert job_id == self.view.job_id
        return self.view

    def trial_frames(self, job_id: str) -> tuple[int, ...]:
        """No frames: the job is a whole render, not a test render (whose pictures `wait` fetches instead)."""
        return ()

    def download(self, result: JobResult, path: Path) -> Path:
        assert result == RESULT
        self.fetched.append(path)
        return path


@pytest.fixture
def farm(monkeypatch: pytest.MonkeyPatch) -> StubClient:
    client = StubClient(JobView("clip-1", "clip-1", JobState.SUCCEEDED, result=RESULT))
    monkeypatch.setattr(submit_commands, "client_of", lambda _args: client)
    monkeypatch.setattr(submit_commands, "is_batch_id", lambda _args, _job: False)
    # `wait` follows the job by its notice where it can: here it has ended already
    monkeypatch.setattr(submit_commands, "follow", lambda client, _args, job, _describe: client.status(job))
    return client


def test_download_puts_a_succeeded_jobs_result_under_its_own_name_or_where_told(
    farm: StubClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["download", "clip-1"]) == Exit.DONE
    assert main(["download", "clip-1", "--output-dir", "outs"]) == Exit.DONE
    assert main(["download", "clip-1", "-o", "mine.mp4"]) == Exit.DONE
    assert farm.fetched == [tmp_path / "clip-1.mp4", Path("outs/clip-1.mp4"), Path("mine.mp4")]


@pytest.mark.parametrize(
    ("state", "code", "said"),
    [
        (JobState.RUNNING, Exit.FAILED, "still RUNNING: nothing to download yet (`fusionfleet wait clip-1` waits"),
        (JobState.REJECTED, Exit.REJECTED, "rejected: no face in face.jpg"),
        (JobState.FAILED, Exit.FAILED, "failed: no face in face.jpg"),
    ],
)
def test_download_of_a_job_without_a_result_says_why(
    farm: StubClient, state: JobState, code: Exit, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    farm.view = JobView("clip-1", "clip-1", state, reason="no face in face.jpg")
    assert main(["download", "clip-1"]) == code
    assert said in capsys.readouterr().err and not farm.fetched


def test_wait_downloads_the_result_once_the_job_ends(farm: StubClient) -> None:
    assert main(["wait", "clip-1", "-o", "out.mp4", "--timeout", "5"]) == Exit.DONE
    assert farm.fetched == [Path("out.mp4")]


def test_wait_that_gives_up_says_the_job_goes_on(farm: StubClient, capsys: pytest.CaptureFixture[str]) -> None:
    farm.view = JobView("clip-1", "clip-1", JobState.RUNNING)
    assert main(["wait", "clip-1", "--timeout", "5"]) == Exit.GAVE_UP
    assert "gave up waiting: still RUNNING after 5 s; `fusionfleet wait clip-1` goes on" in capsys.readouterr().err


def test_a_batch_is_downloaded_into_a_folder_not_a_file(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(submit_commands, "is_batch_id", lambda _args, _job: True)
    assert main(["download", "campaign-1", "-o", "one.mp4"]) == Exit.USAGE
    assert "campaign-1 is a batch: name a folder with --output-dir, not a file" in capsys.readouterr().err


def test_submit_help_states_the_wait_timeout_and_each_stacks_default_engine(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["submit", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert (
        "--timeout S seconds --wait waits before it gives up with exit status 4; the job goes on (default 3600)" in text
    )
    assert "`classic` on the local stack" in text and "`facefusion` on AWS" in text


def test_submit_with_an_output_but_no_wait_says_when_the_file_comes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    face, clip = tmp_path / "face.jpg", tmp_path / "clip.mp4"
    face.write_bytes(b"face")
    clip.write_bytes(b"clip")

    def unreachable(_args: object) -> None:
        raise FusionFleetError("no stack here")

    monkeypatch.setattr(submit_commands, "client_of", unreachable)
    monkeypatch.setattr(submit_commands, "check_local_engine", lambda _args, _options=None: None)
    assert main(["submit", "-s", str(face), "-t", str(clip), "-o", "out.mp4"]) == Exit.FAILED
    said = capsys.readouterr().err
    assert "note: nothing is written to out.mp4 without --wait: `fusionfleet wait JOB -o out.mp4`" in said

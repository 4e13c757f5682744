"""README's command lines run on the local stack as written (tests/support/doc_commands.py reads them from
README.md itself), in a folder holding the media they name: `face.jpg` Grace Hopper's portrait,
`interview.mp4` a 10 s 192×144 shot (the test render's frame 240 is in it), `clip.mp4` and `talk.mp4`
2 s shots, `stills/` two pictures. Only the placeholders are given values: the job's id for `<job-id>`,
the API's port, the token `local token` printed, a tenant of this test's own for `acme` (other tests use
acme); and the main submit's face options go to the classic engine, the one README's `local up` gives
jobs (the e2e stack's default is copy, which refuses them). Each exits 0 and does what it says."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from fleetctl.samples import grace_hopper_path
from tests.e2e.conftest import Stack
from tests.e2e.helpers import api_url
from tests.support.doc_commands import RUN_ON_STACK, DocCommand, fenced_commands
from tests.support.media import decode_all, write_video

README = [command for command in fenced_commands() if command.page == "README.md"]
TENANT = "readme-lines"


def readme_line(*path_and_words: str) -> DocCommand:
    """README's one line of that command that shows those words."""
    found = [
        command for command in README
        if all(word in command.plain() for word in path_and_words) and command.plain()[0] == path_and_words[0]
    ]  # fmt: skip
    assert len(found) == 1, f"README shows {len(found)} `fusionfleet {' '.join(path_and_words)} …` lines"
    return found[0]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    here = tmp_path_factory.mktemp("readme")
    shutil.copy(grace_hopper_path(), here / "face.jpg")
    write_video(here / "interview.mp4", seconds=10, fps=25, width=192, height=144)
    write_video(here / "clip.mp4", seconds=2, fps=25, width=320, height=240)
    shutil.copy(here / "clip.mp4", here / "talk.mp4")
    (here / "stills").mkdir()
    for name in ("a.jpg", "b.jpg"):
        shutil.copy(grace_hopper_path(), here / "stills" / name)
    return here


def run(
    stack: Stack,
    folder: Path,
    command: DocCommand,
    variant: int = 0,
    values: dict[str, str] | None = None,
    engine: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    """The line (or its variant: an optional part taken) with the placeholders given values."""
    values = {"<job-id>": "", "acme": TENANT, **(values or {})}
    argv = [values.get(word, word) for word in command.variants()[variant]]
    argv = [word.replace("PORT", values["PORT"]) if "PORT" in word and "PORT" in values else word for word in argv]
    assert "" not in argv, f"{command.where}: a placeholder without a value: {command.text}"
    result = stack.cli(*argv, *engine, cwd=folder)
    assert result.returncode == 0, f"{command.where}: `fusionfleet {' '.join(argv)}`:\n{result.stderr}"
    return result


def test_readmes_lines_of_a_job_run_on_the_local_stack(stack: Stack, folder: Path) -> None:
    # `local status`: the stack's URLs and processes
    shown = run(stack, folder, readme_line("local", "status"))
    assert "api http" in shown.stdout, shown.stdout
    # `estimate`: nothing spent, the plan the stack's slicer cuts (it has no autoscaler: the fixed plan)
    estimated = run(stack, folder, readme_line("estimate"))
    assert "the fixed 4 s plan" in estimated.stdout, estimated.stdout
    planned = int(estimated.stdout.split("plan", 1)[1].split("segment(s)", 1)[0])
    # the main `submit … --wait --output out.mp4`, its face selector mode for the engine README's `local up`
    # gives jobs (classic; the test stack's is copy, which applies no face options and refuses them)
    submitted = run(stack, folder, readme_line("submit", "--priority"), engine=("--engine", "classic"))
    job = submitted.stdout.strip().splitlines()[-1]
    assert len(decode_all(folder / "out.mp4")[1]) == 250
    # `status`, `list`, `logs`, `workers`; the job was cut as the estimate said
    status = run(stack, folder, readme_line("status"), values={"<job-id>": job}).stdout
    assert "SUCCEEDED" in status and f"{planned} total" in status, (planned, status)
    assert job in run(stack, folder, readme_line("list")).stdout
    assert run(stack, folder, readme_line("logs"), values={"<job-id>": job}).stdout.strip()
    assert "render" in run(stack, folder, readme_line("workers")).stdout
    # `wait <job-id> -o out.mp4` and `download <job-id> -o out.mp4` of the ended job (their optional -o taken)
    (folder / "out.mp4").unlink(missing_ok=True)
    run(stack, folder, readme_line("wait"), 1, values={"<job-id>": job})
    assert len(decode_all(folder / "out.mp4")[1]) == 250
    (folder / "out.mp4").unlink()
    run(stack, folder, readme_line("download"), 1, values={"<job-id>": job})
    assert (folder / "out.mp4").stat().st_size > 0
    # the test render: frames 0, 120 and 240 as PNGs in tries/
    run(stack, folder, readme_line("try"))
    assert sorted(path.name for path in (folder / "tries").glob("*.png")) == [
        "frame-000000.png", "frame-000120.png", "frame-000240.png",
    ]  # fmt: skip
    # the batch: two stills and a clip, each output in out/
    run(stack, folder, readme_line("submit", "--output-dir"))
    assert sorted(path.suffix for path in (folder / "out").iterdir()) == [".jpg", ".jpg", ".mp4"]


def test_readmes_cancel_and_retry_lines_run_on_the_local_stack(stack: Stack, folder: Path) -> None:
    # GIVEN a job whose segments render slowly, running
    stack.set_faults([{"job": "readme-cancel", "action": "slow", "at_frame": 5, "seconds": 25}])
    try:
        started = stack.cli("submit", "--source", "face.jpg", "--target", "clip.mp4", "--name", "readme-cancel",
                            cwd=folder)  # fmt: skip
        assert started.returncode == 0, started.stderr
        job = started.stdout.strip().splitlines()[-1]
        stack.worker_holding(f"of {job}: attempt 1")
        # WHEN README's `cancel <job-id> --wait` stops it THEN it returns once the job reads CANCELLED
        cancelled = run(stack, folder, readme_line("cancel"), 1, values={"<job-id>": job})
        assert f"{job}: cancelled" in cancelled.stderr, cancelled.stderr
        assert "CANCELLED" in stack.cli("status", job).stdout
    finally:
        stack.set_faults([])
    # AND README's `retry <job-id>` runs it again, and `wait <job-id> -o out.mp4` sees it succeed
    run(stack, folder, readme_line("retry"), values={"<job-id>": job})
    (folder / "out.mp4").unlink(missing_ok=True)
    run(stack, folder, readme_line("wait"), 1, values={"<job-id>": job})
    assert len(decode_all(folder / "out.mp4")[1]) == 50


def test_readmes_tenant_and_api_lines_run_on_the_local_stack(stack: Stack, folder: Path) -> None:
    run(stack, folder, readme_line("tenant", "set"))
    shown = run(stack, folder, readme_line("tenant", "show"))
    assert TENANT in shown.stdout, shown.stdout
    token = run(stack, folder, readme_line("local", "token")).stdout.strip()
    # webhooks.md's `local webhook-secret --tenant acme` (README shows none): the tenant's whsec_ secret
    (secret_line,) = [
        c for c in fenced_commands() if c.page == "docs/webhooks.md" and c.plain()[1:2] == ["webhook-secret"]
    ]
    assert run(stack, folder, secret_line).stdout.strip().startswith("whsec_")
    port = api_url(stack).rsplit(":", 1)[1].split("/")[0]
    before = set(folder.iterdir())
    submitted = run(stack, folder, readme_line("submit", "--api"), values={"$TOKEN": token, "PORT": port})
    assert submitted.stdout.strip().splitlines()[-1], submitted.stdout  # the API's id of the job
    # its result downloaded here, under its output's name
    (written,) = set(folder.iterdir()) - before
    assert len(decode_all(written)[1]) == 50


def test_these_tests_run_every_command_placed_on_the_stack() -> None:
    ran = {("local", "status"), ("estimate",), ("submit",), ("status",), ("list",), ("logs",), ("workers",),
           ("wait",), ("download",), ("try",), ("cancel",), ("retry",), ("tenant", "set"), ("tenant", "show"),
           ("local", "token"), ("local", "webhook-secret")}  # fmt: skip
    assert ran >= RUN_ON_STACK, sorted(RUN_ON_STACK - ran)  # (and estimate, which runs without one too)

"""The local stack's workers run the built-in engines, and FaceFusion only where they are given it: a job
for an engine none of them runs is refused at submit, with the reason, before anything is uploaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetctl import job_commands, submit_commands, try_commands
from fleetctl.cli import main
from fleetctl.exits import Exit
from fleetctl.local.engines import check_engine, worker_engines
from fleetctl.local.state import LocalState
from fusionfleet.environment.settings import FUSIONFLEET_FACEFUSION_HOME, FUSIONFLEET_LOCAL_DIR
from fusionfleet.errors import JobRejected


def test_workers_run_facefusion_only_where_they_find_it() -> None:
    assert worker_engines({}, facefusion_importable=False) == ("classic", "copy")
    assert worker_engines({FUSIONFLEET_FACEFUSION_HOME: " "}, facefusion_importable=False) == ("classic", "copy")
    assert worker_engines({FUSIONFLEET_FACEFUSION_HOME: "/opt/facefusion"}, facefusion_importable=False) == (
        "classic",
        "copy",
        "facefusion",
    )
    assert worker_engines({}, facefusion_importable=True) == ("classic", "copy", "facefusion")


def test_an_engine_no_worker_runs_is_refused_with_the_reason() -> None:
    built_in = ("classic", "copy")
    with pytest.raises(JobRejected) as refused:
        check_engine("facefusion", "classic", built_in)
    assert refused.value.reason == (
        "engine 'facefusion': no worker of the local stack runs it (they run classic, copy); "
        f"start the stack with {FUSIONFLEET_FACEFUSION_HOME} naming a FaceFusion 3.8.1 folder to run it"
    )
    with pytest.raises(JobRejected, match=r"engine 'facefusion' \(the local stack's default\): no worker"):
        check_engine(None, "facefusion", built_in)
    check_engine("copy", "classic", built_in)
    check_engine(None, "classic", built_in)
    check_engine("facefusion", "classic", ())  # a state file from before the record: nothing known, nothing refused


def test_the_state_file_keeps_the_engines_and_an_older_one_has_none(tmp_path: Path) -> None:
    LocalState(4566, "us-east-1", "fusionfleet", engines=["classic", "copy"], default_engine="classic").save(
        tmp_path / "state.json"
    )
    loaded = LocalState.load(tmp_path / "state.json")
    assert loaded is not None and (loaded.engines, loaded.default_engine) == (["classic", "copy"], "classic")
    (tmp_path / "old.json").write_text('{"port": 4566, "region": "us-east-1", "stack": "fusionfleet"}')
    old = LocalState.load(tmp_path / "old.json")
    assert old is not None and (old.engines, old.default_engine) == ([], None)


@pytest.fixture
def local_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A running local stack of built-in engines (its state file), and a face and a clip to submit."""
    LocalState(4566, "us-east-1", "fusionfleet", engines=["classic", "copy"], default_engine="classic").save(
        tmp_path / "state" / "state.json"
    )
    monkeypatch.setenv(FUSIONFLEET_LOCAL_DIR, str(tmp_path / "state"))
    monkeypatch.delenv("FUSIONFLEET_ENDPOINT_URL", raising=False)

    def no_stack(_args: object) -> None:
        raise AssertionError("the job reached the stack")

    for module in (submit_commands, try_commands):
        monkeypatch.setattr(module, "client_of", no_stack)
    face, clip = tmp_path / "face.jpg", tmp_path / "clip.mp4"
    face.write_bytes(b"face")
    clip.write_bytes(b"\x00\x00\x00\x18ftypisom" + bytes(64))
    return face, clip


@pytest.mark.parametrize("command", [["submit"], ["try", "--frames", "0"]])
def test_submit_and_try_refuse_an_engine_the_local_workers_do_not_run(
    local_stack: tuple[Path, Path], command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    face, clip = local_stack
    assert main([*command, "-s", str(face), "-t", str(clip), "--engine", "facefusion"]) == Exit.REJECTED
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rejected: engine 'facefusion': no worker of the local stack")


def test_another_endpoint_is_not_the_local_stack(
    local_stack: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    face, clip = local_stack
    monkeypatch.setattr(job_commands, "check_engine", lambda *_args: pytest.fail("checked against the local stack"))
    # WHEN the job goes to another endpoint THEN it reaches that stack (here: the stand-in that refuses it)
    with pytest.raises(AssertionError, match="reached the stack"):
        main(
            ["submit", "-s", str(face), "-t", str(clip), "--engine", "facefusion", "--endpoint-url", "http://elsewhere"]
        )


@pytest.mark.parametrize(
    ("engine", "flags", "said"),
    [
        (["--engine", "copy"], ["--processors", "face_enhancer"], "options.processors: the copy engine does not apply"),
        ([], ["--processors", "face_enhancer"], "the classic engine runs only face_swapper, not face_enhancer"),
    ],
)
@pytest.mark.parametrize("command", [["submit"], ["try", "--frames", "0"]])
def test_options_the_jobs_engine_would_not_apply_are_refused_before_any_upload(
    local_stack: tuple[Path, Path],
    command: list[str],
    engine: list[str],
    flags: list[str],
    said: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN a job for an engine the stack runs (asked for, or the stack's default classic) with an option that
    # engine would not apply WHEN submitted THEN it is refused at once with the slicer's own reason, nothing sent
    face, clip = local_stack
    assert main([*command, "-s", str(face), "-t", str(clip), *engine, *flags]) == Exit.REJECTED
    assert said in capsys.readouterr().err


def test_local_status_states_the_default_engine_and_what_the_workers_run(tmp_path: Path) -> None:
    from fleetctl.local.paths import LocalPaths
    from fleetctl.local.supervisor import LocalStack

    # GIVEN a local stack whose workers run the built-in engines, classic by default
    paths = LocalPaths(root=tmp_path, state_dir=tmp_path / "local")
    LocalState(4566, "us-east-1", "fusionfleet", engines=["classic", "copy"], default_engine="classic").save(
        paths.state_file
    )
    # WHEN its status is printed THEN one line says which engine a job gets and which the workers run
    lines = LocalStack(paths, say=lambda _line: None).status()
    assert "engine classic by default; workers run classic, copy" in lines

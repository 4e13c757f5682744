"""`fusionfleet submit --facefusion-job JOB.json` against fakes of the stack: each step a job of its own, its
files uploaded as `submit` uploads them, its manifest any job's (so `status` and `wait` read it PENDING at
once), and what the file says itself refused on the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fleetctl import job_file_commands
from fleetctl.cli import main
from fleetctl.client import Client
from fleetctl.exits import Exit
from fusionfleet.jobs.manifest import parse_manifest
from fusionfleet.jobs.states import JobState
from fusionfleet.media.ffmpeg import join_argv
from tests.support.fakes import FakeOrchestrator, FakeStorage
from tests.support.farm import RESOURCES


def write_job(folder: Path, steps: list[dict[str, Any]]) -> Path:
    path = folder / "myjob.json"
    path.write_text(json.dumps({"version": "1", "date_created": "2026-12-07T10:00:00+00:00", "date_updated": None,
                                "steps": [{"args": args, "status": "queued"} for args in steps]}))  # fmt: skip
    return path


def remix_chain(folder: Path, first: dict[str, Any], second: dict[str, Any]) -> Path:
    """A job file of a two-step remix chain: a.png's face on clip.mp4 into /out/one.mp4 (with `first`'s arguments),
    then b.png's on that step's output into /out/two.mp4 (with `second`'s); the pictures and the clip written."""
    for name in ("a.png", "b.png"):
        (folder / name).write_bytes(b"\x89PNG\r\n\x1a\n" + name.encode())
    (folder / "clip.mp4").write_bytes(b"clip")
    return write_job(folder, [
        {"source_paths": [str(folder / "a.png")], "target_path": str(folder / "clip.mp4"),
         "output_path": "/out/one.mp4", **first},
        {"source_paths": [str(folder / "b.png")], "target_path": "/out/one-myjob-0.mp4",
         "output_path": "/out/two.mp4", **second},
    ])  # fmt: skip


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Client:
    stack = Client(FakeStorage(), FakeOrchestrator(), RESOURCES)
    monkeypatch.setattr(job_file_commands, "client_of", lambda _args: stack)
    monkeypatch.setattr(job_file_commands, "check_local_engine", lambda _args, _options=None: None)
    return stack


def test_each_step_is_a_job_of_its_own_followable_at_once(
    client: Client, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a job file of two steps on local files
    (tmp_path / "face.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (tmp_path / "a.mp4").write_bytes(b"a")
    (tmp_path / "b.mp4").write_bytes(b"b")
    path = write_job(tmp_path, [
        {"source_paths": [str(tmp_path / "face.png")], "target_path": str(tmp_path / "a.mp4"),
         "output_path": "/out/a.mp4", "face_selector_mode": "many", "output_video_fps": None},
        {"source_paths": [str(tmp_path / "face.png")], "target_path": str(tmp_path / "b.mp4"),
         "output_path": "/out/b.mp4", "processors": ["face_swapper", "face_enhancer"]},
    ])  # fmt: skip
    # WHEN submitted without --wait
    assert main(["submit", "--facefusion-job", str(path), "--priority", "high"]) == Exit.DONE
    # THEN one job id a line, in step order, each PENDING at once with its own target
    ids = capsys.readouterr().out.split()
    assert len(ids) == 2
    views = [client.status(job_id) for job_id in ids]
    assert [view.state for view in views] == [JobState.PENDING, JobState.PENDING]
    # AND each manifest is the step's: its engine FaceFusion's, its options the step's, the flags' priority
    storage = client._storage
    assert isinstance(storage, FakeStorage)
    written = [key for method, _bucket, key in storage.calls if method == "put_bytes" and key.startswith("jobs/")]
    manifests = [json.loads(storage.get_bytes("media", key)) for key in written]
    assert [m["options"] for m in manifests] == [
        {"face_selector_mode": "many"},
        {"processors": ["face_swapper", "face_enhancer"]},
    ]
    assert {m["engine"] for m in manifests} == {"facefusion"} and {m["priority"] for m in manifests} == {"high"}
    assert [storage.get_bytes("media", m["target"]) for m in manifests] == [b"a", b"b"]


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["-s", "face.png"], "leave out -s/--source"),
        (["-o", "out.mp4"], "leave out -o/--output"),
        (["--face-selector-mode", "many"], "leave out --face-selector-mode"),
    ],
)
def test_what_the_job_file_says_is_not_said_again_on_the_command_line(
    client: Client, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], said: str
) -> None:
    path = write_job(tmp_path, [{"source_paths": ["f.png"], "target_path": "t.mp4", "output_path": "o.mp4"}])
    assert main(["submit", "--facefusion-job", str(path), *extra]) == Exit.USAGE
    assert said in capsys.readouterr().err


def test_an_unknown_option_is_refused_before_any_upload(
    client: Client, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_job(tmp_path, [{"source_paths": ["f.png"], "target_path": "t.mp4", "output_path": "o.mp4",
                                 "face_swapper_modle": "inswapper_128"}])  # fmt: skip
    assert main(["submit", "--facefusion-job", str(path)]) == Exit.REJECTED
    assert "steps[0].args.face_swapper_modle: unknown option; did you mean 'face_swapper_model'?" in (
        capsys.readouterr().err
    )
    storage = client._storage
    assert isinstance(storage, FakeStorage) and not storage.calls


def test_steps_joined_into_one_output_need_wait_and_videos(
    client: Client, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN two steps writing one output, as job-run joins them
    (tmp_path / "face.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (tmp_path / "a.mp4").write_bytes(b"\0\0\0\x18ftypisom")
    (tmp_path / "still.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    face = str(tmp_path / "face.png")
    joined = [{"source_paths": [face], "target_path": str(tmp_path / "a.mp4"), "output_path": "/out/a.mp4"}] * 2
    # WHEN submitted without --wait THEN refused: the CLI joins the outputs once each is there (exit 2)
    assert main(["submit", "--facefusion-job", str(write_job(tmp_path, joined))]) == Exit.USAGE
    assert "steps 0, 1 all write /out/a.mp4: the CLI joins their outputs there" in capsys.readouterr().err
    # WHEN one of them renders a picture THEN refused with job-run's reason, before any upload (exit 3)
    mixed = [joined[0], {**joined[0], "target_path": str(tmp_path / "still.png")}]
    assert main(["submit", "--facefusion-job", str(write_job(tmp_path, mixed)), "--wait"]) == Exit.REJECTED
    assert "from a picture (step 1), and FaceFusion's job-run joins only videos" in capsys.readouterr().err
    storage = client._storage
    assert isinstance(storage, FakeStorage) and not storage.calls


def test_a_join_is_a_stream_copy_as_facefusions_concat_video() -> None:
    assert join_argv(Path("list.txt"), Path("out.mp4")) == [
        "-hide_banner", "-nostdin", "-loglevel", "error", "-y",
        "-protocol_whitelist", "file", "-f", "concat", "-safe", "1", "-i", "list.txt",
        "-c:v", "copy", "-c:a", "copy", "-movflags", "+faststart", "-f", "mp4", "out.mp4",
    ]  # fmt: skip


def test_a_remix_chain_of_two_people_is_one_job_of_chained_passes_submitted_at_once(
    client: Client, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN job-remix-step's chain: a's face on the face at 0 of frame 0, then b's on the face at 1 of frame 3
    path = remix_chain(tmp_path, {"reference_frame_number": 0, "reference_face_position": 0},
                       {"reference_frame_number": 3, "reference_face_position": 1})  # fmt: skip
    # WHEN submitted without --wait (a remix that waits for its step would need it)
    assert main(["submit", "--facefusion-job", str(path)]) == Exit.DONE
    # THEN both steps are jobs at once: the first step alone, and the chain as one job on the ORIGINAL target
    ids = capsys.readouterr().out.split()
    assert len(ids) == 2
    storage = client._storage
    assert isinstance(storage, FakeStorage)
    written = [key for method, _bucket, key in storage.calls if method == "put_bytes" and key.startswith("jobs/")]
    first, chain = (json.loads(storage.get_bytes("media", key)) for key in written)
    assert storage.get_bytes("media", first["target"]) == storage.get_bytes("media", chain["target"]) == b"clip"
    # AND the chain maps each step's sources to its person, in step order, by the original target's frames
    assert "source" not in chain and chain["engine"] == "facefusion"
    people = [(storage.get_bytes("media", face["source"][0]), face["reference_frame"], face["reference_face_position"])
              for face in chain["faces"]]  # fmt: skip
    assert people == [(b"\x89PNG\r\n\x1a\na.png", 0, 0), (b"\x89PNG\r\n\x1a\nb.png", 3, 1)]
    assert "reference_frame_number" not in chain.get("options", {})
    # AND it is a manifest the slicer takes
    assert len(parse_manifest(json.dumps(chain).encode(), written[1]).faces) == 2


def test_a_chain_the_slicer_would_refuse_is_refused_before_any_step_is_submitted(
    client: Client, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a remix chain whose steps each pass the checks alone, but whose trims compose to no frames: step 0
    # keeps frames 0-19, step 1 starts at its target's frame 30
    path = remix_chain(tmp_path, {"trim_frame_end": 20}, {"trim_frame_start": 30})
    # WHEN submitted
    assert main(["submit", "--facefusion-job", str(path)]) == Exit.REJECTED
    # THEN the chain's reason is said, and nothing was uploaded (before: step 0's job was submitted first)
    said = capsys.readouterr().err
    assert "steps 0, 1: " in said and "trim_frame" in said, said
    storage = client._storage
    assert isinstance(storage, FakeStorage) and not storage.calls

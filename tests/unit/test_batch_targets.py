"""The CLI's batch targets: which files `--target` names (files, folders, globs) and their upload names."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetctl.batch_client import is_batch, target_files, upload_names
from fleetctl.cli import build_parser
from fusionfleet.errors import FusionFleetError

pytestmark = pytest.mark.unit


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for name in ("b.png", "a.jpg", "c.mp4", "notes.txt", "d.webp"):
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "e.jpg").write_bytes(b"x")
    return tmp_path


def test_a_folder_gives_its_media_sorted_without_subfolders_or_other_files(folder: Path) -> None:
    assert [path.name for path in target_files([str(folder)])] == ["a.jpg", "b.png", "c.mp4", "d.webp"]


def test_a_glob_gives_its_matches_sorted_and_each_file_comes_once(folder: Path) -> None:
    named = [str(folder / "*.jpg"), str(folder / "a.jpg"), str(folder / "sub" / "*"), str(folder / "c.mp4")]
    assert [path.name for path in target_files(named)] == ["a.jpg", "e.jpg", "c.mp4"]


@pytest.mark.parametrize(
    ("entry", "says"),
    [("*.gif", "matches no file"), ("missing.mp4", "neither a file"), ("empty", "no images or videos")],
)
def test_a_target_that_names_nothing_is_refused_naming_it(tmp_path: Path, entry: str, says: str) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(FusionFleetError, match=says) as refused:
        target_files([str(tmp_path / entry)])
    assert str(tmp_path / entry) in refused.value.reason


def test_one_plain_file_is_a_job_and_anything_more_a_batch(folder: Path) -> None:
    assert not is_batch([str(folder / "a.jpg")])
    assert is_batch([str(folder / "a.jpg"), str(folder / "b.png")])
    assert is_batch([str(folder)])
    assert is_batch([str(folder / "*.jpg")])


def test_two_targets_with_one_name_upload_under_different_names(folder: Path) -> None:
    paths = [folder / "a.jpg", folder / "sub" / "a.jpg", folder / "b.png"]
    assert upload_names(paths) == ["a.jpg", "0001-a.jpg", "b.png"]


def test_submit_takes_target_more_than_once_and_an_output_folder() -> None:
    args = build_parser().parse_args(
        ["submit", "--source", "f.jpg", "--target", "a.jpg", "--target", "dir/", "--output-dir", "out", "--wait"]
    )
    assert args.target == ["a.jpg", "dir/"] and args.output_dir == Path("out") and not args.item_notices

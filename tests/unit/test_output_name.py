"""`submit --output out.mp4` of a target that is a picture (whatever its name says) writes the picture under
the name of what it is, `out.png`, and says so in one line (issue 43): never PNG bytes in a `.mp4`."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetctl.api_client import download
from fleetctl.client import Client, named_after_content
from fusionfleet.jobs.views import JobResult
from tests.support.fakes import FakeOrchestrator, FakeStorage
from tests.support.farm import RESOURCES

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


def test_a_png_sent_as_mp4_comes_back_as_png_and_the_user_is_told(tmp_path: Path) -> None:
    storage = FakeStorage()
    client = Client(storage, FakeOrchestrator(), RESOURCES)
    face, picture = tmp_path / "face.jpg", tmp_path / "picture.mp4"
    face.write_bytes(b"\xff\xd8\xff\xe0" + b"\x00" * 64)
    picture.write_bytes(PNG)  # a PNG, named as a video
    # GIVEN it was submitted: the farm names its output by its content
    submission = client.submit([face], picture, name="poster")
    assert submission.output_key == "outputs/poster.png"
    storage.put_bytes("media", submission.output_key, PNG)
    told: list[str] = []
    # WHEN its result is fetched to the --output the user asked for
    written = client.download(JobResult("media", submission.output_key, "", 1, 0.0), tmp_path / "out.mp4", told.append)
    # THEN the picture lies in out.png, nothing in out.mp4, and one line said why
    assert written == tmp_path / "out.png" and written.read_bytes() == PNG
    assert not (tmp_path / "out.mp4").exists()
    assert told == [
        f"the output is a PNG picture: writing it to {tmp_path / 'out.png'} rather than {tmp_path / 'out.mp4'}"
    ]


@pytest.mark.parametrize(
    ("asked", "output_key", "written"),
    [
        ("out.mp4", "outputs/a.png", "out.png"),  # a picture asked for as a video
        ("out.jpg", "outputs/a.png", "out.png"),  # another picture format
        ("out.png", "outputs/a.mp4", "out.mp4"),  # a video asked for as a picture
        ("out.webm", "outputs/a.mp4", "out.mp4"),  # another container
        ("out.mp4", "outputs/a.webm", "out.webm"),  # a WebM output (FaceFusion's container) asked for as MP4
        ("out.mkv", "outputs/a.mkv", "out.mkv"),  # as asked
        ("out.mp4", "outputs/a.mp4", "out.mp4"),  # as asked
        ("out.jpeg", "outputs/a.jpg", "out.jpeg"),  # the same format under its other name
        ("out.MOV", "outputs/a.mp4", "out.MOV"),  # MP4 under another name of the family
        ("result", "outputs/a.png", "result"),  # no extension: nothing it names is wrong
        ("out.bin", "outputs/a.png", "out.bin"),  # an extension naming no media format
    ],
)
def test_the_name_follows_the_content_only_where_the_extension_names_another_format(
    asked: str, output_key: str, written: str
) -> None:
    path, told = named_after_content(Path("d") / asked, output_key)
    assert path == Path("d") / written
    assert bool(told) == (asked != written)


def test_the_api_download_names_the_file_after_the_links_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a download link whose key is a PNG (a tenant's picture sent as target.mp4)
    source = tmp_path / "tenants" / "acme" / "outputs" / "job.png"
    source.parent.mkdir(parents=True)
    source.write_bytes(PNG)
    # WHEN it is fetched to the name the CLI made from the target's name
    written = download(source.as_uri(), tmp_path / "job.mp4")
    # THEN it lands as job.png, told on stderr
    assert written == tmp_path / "job.png" and written.read_bytes() == PNG
    assert "the output is a PNG picture" in capsys.readouterr().err


def test_a_video_targets_output_keeps_its_container_as_facefusions_does(tmp_path: Path) -> None:
    # GIVEN a Matroska target (its bytes are no picture) WHEN it is submitted
    storage = FakeStorage()
    face, clip = tmp_path / "face.jpg", tmp_path / "clip.MKV"
    face.write_bytes(b"\xff\xd8\xff\xe0" + b"\x00" * 64)
    clip.write_bytes(b"\x1a\x45\xdf\xa3" + b"\x00" * 64)
    submission = Client(storage, FakeOrchestrator(), RESOURCES).submit([face], clip, name="talk")
    # THEN its output is a Matroska file under the name of what it holds
    assert submission.output_key == "outputs/talk.mkv"
    path, told = named_after_content(tmp_path / "out.mp4", submission.output_key)
    assert path == tmp_path / "out.mkv" and told.startswith("the output is a Matroska video")

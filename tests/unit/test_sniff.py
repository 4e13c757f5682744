from __future__ import annotations

import pytest

from fusionfleet.errors import InputRejected
from fusionfleet.media.sniff import MATROSKA, MOV, sniff_image, sniff_video


def test_mp4_and_matroska_are_recognised() -> None:
    assert sniff_video(b"\x00\x00\x00\x20ftypisom\x00\x00\x02\x00", "t") == MOV
    assert sniff_video(b"\x1a\x45\xdf\xa3\x9f\x42\x86\x81", "t") == MATROSKA


@pytest.mark.parametrize(
    ("head", "described"),
    [
        (b"#EXTM3U\n#EXT-X-VERSION:3\n", "an HLS playlist"),
        (b"ffconcat version 1.0\nfile /etc/passwd\n", "an ffconcat script"),
        (b"RIFF\x00\x00\x00\x00AVI LIST", "an AVI file"),
        (b"", "an empty file"),
        (b"\xff\xd8\xff\xe0\x00\x10JFIF", "a JPEG image"),
        (b"ID3\x04\x00\x00\x00", "an MP3 audio file"),
        (b"hello, this is not a video\n", "a text file"),
    ],
)
def test_other_files_are_refused_and_named(head: bytes, described: str) -> None:
    with pytest.raises(InputRejected) as caught:
        sniff_video(head, "target 'x.mp4'")
    assert "target 'x.mp4' is not a video in an accepted container" in caught.value.reason
    assert described in caught.value.reason


def test_images() -> None:
    assert sniff_image(b"\x89PNG\r\n\x1a\n....", "s") == "png"
    assert sniff_image(b"RIFF\x00\x00\x00\x00WEBPVP8 ", "s") == "webp"
    with pytest.raises(InputRejected, match="not a JPEG, PNG, WebP, BMP or TIFF image: it is a GIF image"):
        sniff_image(b"GIF89a", "source[0]")

"""Hostile and broken uploads, made on the fly: what the slicer must refuse without opening anything else.

Every file that points elsewhere points at SECRET_PATH (whose content is SECRET) or at an internal
URL, so a test can check the secret shows up nowhere.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

from tests.support.media import ffmpeg

SECRET = "FUSIONFLEET-SECRET-7f3a"
INTERNAL_URL = "http://169.254.169.254/latest/meta-data/iam/security-credentials/"


def _playlist(secret: Path) -> str:
    return (
        "#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:0\n#EXT-X-TARGETDURATION:10\n"
        f"#EXTINF:10.0,\nfile://{secret}\n#EXTINF:10.0,\n{INTERNAL_URL}\n#EXT-X-ENDLIST\n"
    )


def zero_bytes(folder: Path, secret: Path, clip: Path) -> Path:
    path = folder / "empty.mp4"
    path.write_bytes(b"")
    return path


def not_media(folder: Path, secret: Path, clip: Path) -> Path:
    path = folder / "notes.mp4"
    path.write_text("shopping list: eggs, milk\n")
    return path


def truncated(folder: Path, secret: Path, clip: Path) -> Path:
    plain = folder / "plain.mp4"
    ffmpeg("-i", str(clip), "-c", "copy", str(plain))  # index (moov) at the end
    path = folder / "truncated.mp4"
    path.write_bytes(plain.read_bytes()[: plain.stat().st_size // 2])
    return path


def audio_only(folder: Path, secret: Path, clip: Path) -> Path:
    path = folder / "song.mp4"
    ffmpeg("-f", "lavfi", "-i", "sine=duration=2", "-c:a", "aac", str(path))
    return path


def hls_as_mp4(folder: Path, secret: Path, clip: Path) -> Path:
    path = folder / "playlist.mp4"
    path.write_text(_playlist(secret))
    return path


def ffconcat_as_mp4(folder: Path, secret: Path, clip: Path) -> Path:
    path = folder / "concat.mp4"
    path.write_text(f"ffconcat version 1.0\nfile '{secret}'\nfile '{INTERNAL_URL}'\n")
    return path


def avi_with_hls(folder: Path, secret: Path, clip: Path) -> Path:
    """The known ffmpeg exploit's shape: an AVI whose 'subtitle' chunk is an HLS playlist."""
    playlist = _playlist(secret).encode()
    chunk = b"GAB2\x00\x02\x00" + struct.pack("<I", len(playlist)) + playlist
    movi = b"LIST" + struct.pack("<I", 4 + 8 + len(chunk)) + b"movi" + b"02tx" + struct.pack("<I", len(chunk)) + chunk
    header = b"LIST" + struct.pack("<I", 4) + b"hdrl"
    body = b"AVI " + header + movi
    path = folder / "exploit.mp4"
    path.write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)
    return path


def huge_dimensions(folder: Path, secret: Path, clip: Path) -> Path:
    """A Matroska header claiming 8000×8000 for a 320×256 FFV1 stream (FFV1 takes the container's size)."""
    source = folder / "ffv1.mkv"
    ffmpeg("-f", "lavfi", "-i", "testsrc=size=320x256:rate=25:duration=1", "-c:v", "ffv1", str(source))
    data = bytearray(source.read_bytes())
    width = data.find(bytes([0xB0, 0x82, 0x01, 0x40]))
    height = data.find(bytes([0xBA, 0x82, 0x01, 0x00]))
    data[width + 2 : width + 4] = struct.pack(">H", 8000)
    data[height + 2 : height + 4] = struct.pack(">H", 8000)
    path = folder / "huge.mkv"
    path.write_bytes(bytes(data))
    return path


def huge_frame_rate(folder: Path, secret: Path, clip: Path) -> Path:
    """An MP4 whose media timescale was multiplied by 1000: 25 fps claims to be 25000 fps."""
    data = bytearray(clip.read_bytes())
    at = data.find(b"mdhd")
    timescale = struct.unpack(">I", data[at + 16 : at + 20])[0]
    data[at + 16 : at + 20] = struct.pack(">I", timescale * 1000)
    path = folder / "fast.mp4"
    path.write_bytes(bytes(data))
    return path


# (maker, what the rejection must say)
HOSTILE_TARGETS: dict[str, tuple[Callable[[Path, Path, Path], Path], str]] = {
    "zero bytes": (zero_bytes, "is empty (0 bytes)"),
    "not media": (not_media, "it is a text file"),
    "truncated": (truncated, "the file is truncated or damaged"),
    "audio only": (audio_only, "has no video stream (audio only)"),
    "HLS renamed": (hls_as_mp4, "it is an HLS playlist"),
    "ffconcat renamed": (ffconcat_as_mp4, "it is an ffconcat script"),
    "AVI embedding HLS": (avi_with_hls, "it is an AVI file"),
    "huge dimensions": (huge_dimensions, "is 8000×8000, over the limit of 3840×2160"),
    "huge frame rate": (huge_frame_rate, "runs at 25000.000 fps, over the limit of 120"),
}

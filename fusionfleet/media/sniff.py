"""Decide from a file's first bytes what it is, before any demuxer sees it.

User files are only ever opened with a demuxer chosen here (never ffmpeg's auto-detection), so a
playlist or concat script renamed to .mp4 is refused without being parsed: those formats make a
demuxer open other files or URLs.
"""

from __future__ import annotations

from typing import Literal

from fusionfleet.errors import InputRejected

# What a job's source is: a face image, or the audio FaceFusion's lip syncer hears.
SourceKind = Literal["image", "audio"]

SNIFF_BYTES = 64

# Demuxer names as PyAV/ffmpeg know them.
MOV = "mov"
MATROSKA = "matroska"
VIDEO_CONTAINERS = {MOV: "MP4/MOV", MATROSKA: "Matroska/WebM"}
# The image formats FaceFusion 3.8.1 reads (facefusion/choices.py image_type_set), for faces and targets.
IMAGE_FORMATS = ("jpeg", "png", "webp", "bmp", "tiff")
IMAGE_NAMES = {"jpeg": "JPEG", "png": "PNG", "webp": "WebP", "bmp": "BMP", "tiff": "TIFF"}
VIDEO = "video"
IMAGE = "image"
# Audio sources (FaceFusion's audio formats: flac, m4a, mp3, ogg, opus, wav), by the demuxer that reads them.
AUDIO_CONTAINERS = {"wav": "WAV", "mp3": "MP3", "flac": "FLAC", "ogg": "Ogg/Opus", MOV: "M4A"}

# ISO base media files start with one of these top-level boxes (ftyp in MP4; older MOVs may
# start with free/wide/mdat/moov).
_MOV_BOXES = (b"ftyp", b"moov", b"mdat", b"free", b"wide", b"skip", b"pnot")


def _describe(head: bytes) -> str:
    """Name what a rejected file looks like, so the user learns what they uploaded."""
    stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not head:
        return "an empty file (0 bytes)"
    if stripped.startswith(b"#EXTM3U"):
        return "an HLS playlist"
    if stripped.lower().startswith(b"ffconcat"):
        return "an ffconcat script"
    if head.startswith(b"RIFF") and head[8:12] == b"AVI ":
        return "an AVI file (not an accepted container)"
    if head.startswith(b"RIFF") and head[8:12] == b"WAVE":
        return "a WAV audio file"
    if (image := image_format(head)) is not None:
        return f"a {IMAGE_NAMES[image]} image"
    if head.startswith(b"ID3") or head[:2] in (b"\xff\xfb", b"\xff\xf3", b"\xff\xf2"):
        return "an MP3 audio file"
    if head.startswith(b"GIF8"):
        return "a GIF image"
    if stripped[:1] in (b"<", b"{", b"["):
        return "a text document (XML/HTML/JSON)"
    if all(32 <= byte < 127 or byte in (9, 10, 13) for byte in head):
        return "a text file"
    return "unrecognised binary data"


def sniff_video(head: bytes, what: str) -> str:
    """The demuxer for a target video, or InputRejected naming what the file looks like instead."""
    if len(head) >= 8 and head[4:8] in _MOV_BOXES:
        return MOV
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return MATROSKA
    accepted = ", ".join(VIDEO_CONTAINERS.values())
    raise InputRejected(f"{what} is not a video in an accepted container ({accepted}): it is {_describe(head)}")


def _is_bmp(head: bytes) -> bool:
    # "BM", then the file size, two reserved words and the pixel offset: the DIB header follows at 14.
    return (
        head.startswith(b"BM")
        and len(head) >= 18
        and int.from_bytes(head[14:18], "little") in (12, 40, 52, 56, 64, 108, 124)
    )


def _is_tiff(head: bytes) -> bool:
    return head.startswith((b"II*\x00", b"MM\x00*"))


def image_format(head: bytes) -> str | None:
    """The image format the head shows (one of IMAGE_FORMATS), or None."""
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "webp"
    if _is_bmp(head):
        return "bmp"
    if _is_tiff(head):
        return "tiff"
    return None


def _image_names() -> str:
    names = [IMAGE_NAMES[name] for name in IMAGE_FORMATS]
    return ", ".join(names[:-1]) + " or " + names[-1]


def sniff_image(head: bytes, what: str) -> str:
    """The format of an image (one of IMAGE_FORMATS), or InputRejected."""
    found = image_format(head)
    if found is None:
        raise InputRejected(f"{what} is not a {_image_names()} image: it is {_describe(head)}")
    return found


def sniff_target(head: bytes, what: str) -> tuple[str, str]:
    """(VIDEO, demuxer) for a video target, (IMAGE, format) for an image target, or InputRejected naming both."""
    if (len(head) >= 8 and head[4:8] in _MOV_BOXES) or head.startswith(b"\x1a\x45\xdf\xa3"):
        return VIDEO, sniff_video(head, what)
    found = image_format(head)
    if found is not None:
        return IMAGE, found
    accepted = ", ".join(VIDEO_CONTAINERS.values())
    raise InputRejected(
        f"{what} is neither a video in an accepted container ({accepted}) nor a {_image_names()} image: "
        f"it is {_describe(head)}"
    )


def _is_mp3(head: bytes) -> bool:
    # An ID3 tag, or an MPEG audio frame header (11 sync bits, layer III).
    return head.startswith(b"ID3") or (len(head) >= 2 and head[0] == 0xFF and head[1] & 0xE6 == 0xE2)


def sniff_audio(head: bytes) -> str | None:
    """The demuxer for an audio source, or None when the bytes are no audio format FaceFusion takes.

    MP4/M4A starts like a video; whether it holds audio only is the probe's to say.
    """
    if head.startswith(b"RIFF") and head[8:12] == b"WAVE":
        return "wav"
    if head.startswith(b"fLaC"):
        return "flac"
    if head.startswith(b"OggS"):
        return "ogg"
    if len(head) >= 8 and head[4:8] == b"ftyp":
        return MOV
    if _is_mp3(head):
        return "mp3"
    return None


def sniff_source(head: bytes, what: str) -> SourceKind:
    """'image' or 'audio' for a job's source, or InputRejected naming what the file looks like instead."""
    try:
        sniff_image(head, what)
        return "image"
    except InputRejected:
        pass
    if sniff_audio(head) is not None:
        return "audio"
    audio = ", ".join(AUDIO_CONTAINERS.values())
    raise InputRejected(
        f"{what} is neither a face image ({_image_names()}) nor an audio file ({audio}): it is {_describe(head)}"
    )

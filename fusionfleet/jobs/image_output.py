"""An image target's output, decided once by the slicer with FaceFusion 3.8.1's semantics. Pure.

FaceFusion's image workflow (workflows/to_image.py, vision.py, ffmpeg_builder.py):
- the output's size is the target's × `output_image_scale`, each side cut to an int and rounded to an
  even number (`scale_resolution`, `normalize_resolution`: Python's round, halves to even);
- the picture is processed at the target's size when that is smaller than the output's (a Python tuple
  comparison: width first), else at the output's, so a scale below 1 shrinks it before processing
  (`restrict_image_resolution`);
- the result is written at the output's size with `output_image_quality` (0..100, default 80): for
  WebP as ffmpeg's `-q:v` quality itself, for every other format as a JPEG-style compression
  `round(31 - quality × 0.31)` (`set_image_quality`), which PNG, BMP and TIFF ignore.
The output keeps the target's format unless the manifest's output key names another one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from types import MappingProxyType
from typing import Any

from fusionfleet.facefusion.requirements import image_keeps_alpha
from fusionfleet.jobs.output_format import MUXERS, container_of_key

# What an output key's extension asks for, and the extension each format is written with by default.
IMAGE_EXTENSIONS: Mapping[str, str] = MappingProxyType(
    {".jpg": "jpeg", ".jpeg": "jpeg", ".png": "png", ".webp": "webp", ".bmp": "bmp", ".tif": "tiff", ".tiff": "tiff"}
)
FORMAT_EXTENSIONS: Mapping[str, str] = MappingProxyType(
    {"jpeg": ".jpg", "png": ".png", "webp": ".webp", "bmp": ".bmp", "tiff": ".tiff"}
)
IMAGE_CONTENT_TYPES: Mapping[str, str] = MappingProxyType(
    {"jpeg": "image/jpeg", "png": "image/png", "webp": "image/webp", "bmp": "image/bmp", "tiff": "image/tiff"}
)
DEFAULT_IMAGE_QUALITY = 80  # FaceFusion's default output_image_quality
DEFAULT_IMAGE_SCALE = 1.0


def extension_of(key: str) -> str:
    """`outputs/a.JPG` → `.jpg`; "" without one."""
    name = key.rsplit("/", 1)[-1]
    stem, dot, extension = name.rpartition(".")
    return f".{extension.lower()}" if dot and stem else ""


def image_format_of_key(key: str) -> str | None:
    """The image format an output key's extension names, or None."""
    return IMAGE_EXTENSIONS.get(extension_of(key))


def output_suffix(target_key: str, target_format: str) -> str:
    """The default output's extension for an image target: the target's own, when it names its format
    (`.jpeg` stays `.jpeg`), else the format's usual one."""
    own = extension_of(target_key)
    return own if IMAGE_EXTENSIONS.get(own) == target_format else FORMAT_EXTENSIONS[target_format]


def scale_resolution(width: int, height: int, scale: float) -> tuple[int, int]:
    """FaceFusion's scale_resolution: int() of each scaled side, then rounded to even (halves to even)."""
    scaled = (int(width * scale), int(height * scale))
    if scaled[0] <= 0 or scaled[1] <= 0:
        return 0, 0
    return round(scaled[0] / 2) * 2, round(scaled[1] / 2) * 2


def work_resolution(target: tuple[int, int], output: tuple[int, int]) -> tuple[int, int]:
    """FaceFusion's restrict_image_resolution: the target's size when it is smaller (tuple order), else the output's."""
    return target if target < output else output


@dataclass(frozen=True)
class ImageOutput:
    """How an image target is rendered and written: decided once, read by the worker and the merge."""

    format: str  # the output's format (one of FORMAT_EXTENSIONS)
    width: int  # the output's size
    height: int
    work_width: int  # the size the engine processes the picture at
    work_height: int
    quality: int  # output_image_quality
    # background_remover's matte is written as the output's alpha, as FaceFusion writes it (the target's and the
    # output's formats both hold alpha: fusionfleet.facefusion.requirements.image_keeps_alpha).
    alpha: bool = False

    @property
    def work_size(self) -> tuple[int, int]:
        return self.work_width, self.work_height

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def image_output_problem(target_size: tuple[int, int], options: Mapping[str, object]) -> str | None:
    """Why the options give no picture for this target (a scale that leaves no pixel), or None."""
    scale = float(str(options.get("output_image_scale", DEFAULT_IMAGE_SCALE)))
    if scale_resolution(*target_size, scale) == (0, 0):
        return (
            f"options.output_image_scale: {scale:g} leaves no pixel of the {target_size[0]}×{target_size[1]} target "
            "image (FaceFusion rounds each side to an even number)"
        )
    return None


def image_output(
    target_format: str, target_size: tuple[int, int], options: Mapping[str, object], output_key: str
) -> ImageOutput:
    """The output of an image target whose output key is `output_key` (its extension names the format)."""
    scale = float(str(options.get("output_image_scale", DEFAULT_IMAGE_SCALE)))
    quality = int(str(options.get("output_image_quality", DEFAULT_IMAGE_QUALITY)))
    width, height = scale_resolution(*target_size, scale)
    work = work_resolution(target_size, (width, height))
    output_format = image_format_of_key(output_key) or target_format
    return ImageOutput(
        format=output_format,
        width=width,
        height=height,
        work_width=work[0],
        work_height=work[1],
        quality=quality,
        alpha=image_keeps_alpha(options, target_format, output_format),
    )


def output_kind_problem(target_kind: str, output_key: str) -> str | None:
    """Why an output key does not suit the target (a video's output is a video container FaceFusion writes,
    an image's an image), or None."""
    extension = extension_of(output_key)
    if target_kind == "video" and container_of_key(output_key) is None:
        return (
            f"output: key {output_key!r} must end in a video container ({', '.join('.' + c for c in MUXERS)}): "
            "the target is a video"
        )
    if target_kind == "image" and extension not in IMAGE_EXTENSIONS:
        return (
            f"output: key {output_key!r} must end in an image extension ({', '.join(IMAGE_EXTENSIONS)}): "
            "the target is an image"
        )
    return None

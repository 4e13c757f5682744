"""Colour as FaceFusion 3.8.1 handles it, for the farm's decoder and encoder to do the same.

FaceFusion reads a PQ or HLG target through ffmpeg's scale filter, tone-mapped to BT.709
(ffmpeg_builder.restrict_color_transfer), and writes its output converted with the BT.709 matrix in
TV range and tagged BT.709 (ffmpeg_builder.convert_color_space('bt709')). The farm's frames are
therefore BT.709 SDR pictures whatever the target, and its output is tagged as FaceFusion's is. The
choice is made once per job, at planning: the target's transfer is part of its probe (VideoInfo),
and the output's colour part of the job's encoder settings. Pure.
"""

from __future__ import annotations

# AVColorTransferCharacteristic values (libavutil/pixfmt.h) with the names ffmpeg gives them.
TRANSFER_NAMES = {1: "bt709", 6: "smpte170m", 13: "iec61966-2-1", 14: "bt2020-10", 15: "bt2020-12",
                  16: "smpte2084", 18: "arib-std-b67"}  # fmt: skip
# The transfers FaceFusion tone-maps when it reads a target: PQ and HLG.
HDR_TRANSFERS = frozenset({"smpte2084", "arib-std-b67"})
TONE_MAP_FILTER = "scale=out_primaries=bt709:out_transfer=bt709:intent=perceptual"
BT709 = "bt709"
BT709_FILTER = (
    "scale=out_color_matrix=bt709:out_range=tv,setparams=colorspace=bt709:color_primaries=bt709:color_trc=bt709"
)


def transfer_name(code: int | None) -> str:
    """The name of a stream's transfer characteristic; "" when unspecified."""
    if not code or code == 2:  # 2: unspecified
        return ""
    return TRANSFER_NAMES.get(code, str(code))


def tone_maps(transfer: str) -> bool:
    """Whether frames of a target with this transfer are tone-mapped to BT.709 when read."""
    return transfer in HDR_TRANSFERS


def output_filter(colour: str) -> str | None:
    """The encoder's colour conversion and tags for a job's output colour ("": none, as jobs planned before)."""
    return BT709_FILTER if colour == BT709 else None

"""The output's audio: what the merge does with the target's, decided by the job's engine and options.

`facefusion` jobs get FaceFusion's own (workflows/to_video.restore_audio, ffmpeg.restore_audio): the
target's first audio track only, re-encoded with the job's encoder, or FaceFusion's default (the
first it offers: FLAC), at its quality and always through its volume filter, cut to the video's
length; at volume 0 the output has no audio at all. The built-in engines keep the farm's promise of
an untouched soundtrack: every track copied, unless an audio option asks for an encode (with
FaceFusion's quality scales; volume 0 then leaves silent tracks).

Where the job renders part of the target (trim), the audio is cut to that part, as FaceFusion cuts
it (`-ss start/fps -to end/fps` on the target, ffmpeg_builder.select_media_range), and to the video's
length. Where the job has an audio source (the lip syncer's), the output carries that instead, from its
start, cut to the video's length (ffmpeg.replace_audio), encoded as the plan says.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from fusionfleet.jobs.output_format import DEFAULT_CONTAINER, fix_audio_encoder
from fusionfleet.jobs.timeline import Timeline

AUDIO_OPTIONS = ("output_audio_encoder", "output_audio_quality", "output_audio_volume")
DEFAULT_AUDIO_ENCODER = "aac"
# The first of FaceFusion's output_audio_encoders (choices.py) that an ffmpeg has: FaceFusion's default.
FACEFUSION_AUDIO_ENCODER = "flac"
DEFAULT_AUDIO_QUALITY = 80  # FaceFusion's default
DEFAULT_AUDIO_VOLUME = 100


@dataclass(frozen=True)
class AudioSettings:
    """None: copy the target's audio. Otherwise every track is re-encoded with these."""

    encoder: str
    quality: int
    volume: int


@dataclass(frozen=True)
class AudioPlan:
    """What the merge does with the target's audio."""

    keep: bool = True  # False: the output has no audio
    settings: AudioSettings | None = None  # None: copied as it is
    first_track_only: bool = False
    cut_to_video: bool = False  # cut to the video's length, the volume filter always applied (FaceFusion's way)


def audio_plan(engine: str, options: Mapping[str, object], container: str = DEFAULT_CONTAINER) -> AudioPlan:
    """The job's audio, by its engine: FaceFusion's rules for `facefusion`, the farm's for the others. Pure.

    An encoder the output's container does not take is swapped as FaceFusion swaps it (a WebM's is Opus)."""
    if engine != "facefusion":
        settings = audio_settings(options)
        if settings is not None:
            settings = replace(settings, encoder=fix_audio_encoder(container, settings.encoder))
        return AudioPlan(settings=settings)
    volume = int(str(options.get("output_audio_volume", DEFAULT_AUDIO_VOLUME)))
    if volume == 0:
        return AudioPlan(keep=False)
    settings = AudioSettings(
        encoder=fix_audio_encoder(container, str(options.get("output_audio_encoder", FACEFUSION_AUDIO_ENCODER))),
        quality=int(str(options.get("output_audio_quality", DEFAULT_AUDIO_QUALITY))),
        volume=volume,
    )
    return AudioPlan(settings=settings, first_track_only=True, cut_to_video=True)


@dataclass(frozen=True)
class AudioCut:
    """Which part of the audio input the merge reads, and how long the output's audio may be."""

    window: tuple[float, float] | None = None  # (start, end) seconds of the input; None: all of it
    length_s: float | None = None  # the output's length (-t); None: as long as the audio


def audio_cut(frames: Timeline, target_frames: int, plan: AudioPlan, replaced: bool) -> AudioCut:
    """The cut of the output's audio for the job's timeline (`target_frames`: the whole target's). Pure.

    `replaced`: the audio is the job's audio source, read from its start as FaceFusion reads it.
    """
    video_s = float(frames.duration_s)
    if replaced:
        return AudioCut(None, video_s)
    whole = frames.start == 0 and frames.end == target_frames and frames.mode == "same"
    if whole and not plan.cut_to_video:
        return AudioCut()  # the farm's untouched soundtrack
    fps = frames.source_fps
    return AudioCut((float(frames.start / fps), float(frames.end / fps)), video_s)


def audio_settings(options: Mapping[str, object]) -> AudioSettings | None:
    """The job's audio settings, or None when it sets no audio option (the audio is copied)."""
    if not any(name in options for name in AUDIO_OPTIONS):
        return None
    return AudioSettings(
        encoder=str(options.get("output_audio_encoder", DEFAULT_AUDIO_ENCODER)),
        quality=int(str(options.get("output_audio_quality", DEFAULT_AUDIO_QUALITY))),
        volume=int(str(options.get("output_audio_volume", DEFAULT_AUDIO_VOLUME))),
    )


def _interp(value: int, low: float, high: float) -> float:
    """numpy.interp over 0..100, as FaceFusion maps its quality percentages."""
    return low + (high - low) * max(0, min(100, value)) / 100


def audio_quality_args(encoder: str, quality: int) -> list[str]:
    """FaceFusion's quality scale per encoder (its ffmpeg_builder.set_audio_quality)."""
    if encoder == "aac":
        return ["-q:a", str(round(_interp(quality, 0.1, 2.0), 1))]
    if encoder == "libmp3lame":
        return ["-q:a", str(round(_interp(quality, 9, 0)))]
    if encoder == "libopus":
        return ["-b:a", f"{round(_interp(quality, 64, 256))}k"]
    if encoder == "libvorbis":
        return ["-q:a", str(round(_interp(quality, -1, 10), 1))]
    return []  # flac and PCM are lossless: nothing to choose


def audio_encode_args(
    settings: AudioSettings, always_volume: bool = False, trim: tuple[float, float] | None = None
) -> list[str]:
    """Encoder, quality and volume for every output audio track; volume 0 leaves silent tracks.

    `always_volume`: the volume filter even at 100 %, as FaceFusion's restore_audio writes it. `trim`:
    only the samples of (start, end) seconds, cut from the decoded sound (atrim): a seek into the
    audio-only file the farm reads lands 768 samples off what FaceFusion's seek into the whole target
    decodes (measured), the samples atrim keeps are FaceFusion's exactly.
    """
    chain = [f"atrim=start={trim[0]}:end={trim[1]}", "asetpts=PTS-STARTPTS"] if trim else []
    if settings.volume != DEFAULT_AUDIO_VOLUME or always_volume:
        chain.append(f"volume={settings.volume / 100}")
    filters = ["-filter:a", ",".join(chain)] if chain else []
    return ["-c:a", settings.encoder, *audio_quality_args(settings.encoder, settings.quality), *filters]

"""The engine interface every face-swap engine implements.

An engine is created once per worker process, `prepare()`d once (model loading), then asked to
`render()` many segments, and finally `close()`d. `render()` receives the segment's decoded frames
in order and must yield exactly one output image per input frame, in the same order, with the same
shape: the worker checks this and treats any deviation as a failed segment.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from fusionfleet.jobs.manifest import QUALITIES
from fusionfleet.jobs.timeline import Timeline

Image = npt.NDArray[np.uint8]
"""An H×W×3 uint8 image in BGR channel order (OpenCV's convention); H×W×4 BGRA out of an engine whose job
keeps alpha (`EngineJob.alpha`)."""

# The built-in engine's presets are the qualities a manifest may name (defined once, in the domain).
QUALITY_PRESETS = QUALITIES


class EngineError(Exception):
    """The engine could not render a segment; `reason` is shown to the user."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class EngineUnavailable(EngineError):
    """The engine cannot run on this worker at all (for example FaceFusion is not installed)."""


@dataclass(frozen=True)
class Frame:
    """One decoded target frame.

    `index` is the frame's number in the whole target video. `emit` is False for lead-in frames
    the worker feeds before the segment's first frame so that trackers and temporal filters are
    warmed up, and for the lead-out frames after its last that an engine asked to look ahead to
    (`LooksAhead`); the engine still yields an output for them and the worker drops it.
    """

    index: int
    image: Image
    emit: bool = True
    # The number FaceFusion's processors give it (the lip syncer hears the source audio by it): its
    # index, but counted from the trim's start among kept frames where a lower rate drops frames.
    number: int | None = None


@dataclass(frozen=True)
class Person:
    """One mapping of a job with `faces` (fusionfleet.jobs.faces): the sources that go on a person
    (averaged as a job's sources are) and the reference face that names them, the face at `position`
    of `reference` (the user's image of them, or the target frame the slicer decoded once for the job)."""

    sources: tuple[Image, ...]
    reference: Image
    position: int = 0
    reference_is_frame: bool = False
    # A chain's step: its pass's own options in place of the job's (None: the job's); FaceFusion's engine only.
    options: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class EngineJob:
    """Everything about a job an engine may read, frozen for the duration of a segment."""

    job_id: str
    sources: tuple[Image, ...]
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    quality: str = "balanced"
    reference: Image | None = None
    # True when `reference` is the target's reference frame (FaceFusion's reference_frame_number, decoded
    # once per job), not a user's reference image: a frame without a face then means nobody is swapped,
    # as in FaceFusion, rather than a refused input.
    reference_is_frame: bool = False
    fps: float = 25.0
    work_dir: Path = Path("/tmp")
    # The job's content-analysis verdict was made once over the whole target and passed
    # (fusionfleet.facefusion.content_analysis): the engine must not decide again from this segment's frames.
    content_decided: bool = False
    # The job's audio source (fusionfleet.media.source_audio.copy_audio's copy), for FaceFusion's lip syncer.
    audio: Path | None = None
    # The job's voice, extracted from `audio` once by its analysis step (gpu_worker.rendering.job_analysis):
    # the lip syncer hears it rather than extracting it again per segment. None: extracted here, as before.
    voice: Path | None = None
    # The frames the job renders and its output rate (fusionfleet.jobs.timeline); None: the whole target.
    timeline: Timeline | None = None
    # Several faces on several people: each person's sources and reference, the same for every segment.
    # When given, `sources` and `reference` are not used.
    people: tuple[Person, ...] = ()
    # The output keeps FaceFusion's alpha (background_remover's matte, fusionfleet.facefusion.requirements): the
    # engine yields H×W×4 BGRA images, opaque where nothing was removed; else H×W×3 BGR.
    alpha: bool = False

    def option(self, name: str, default: Any = None) -> Any:
        return self.options.get(name, default)


@runtime_checkable
class ContentAnalyser(Protocol):
    """An engine that can run its content analyser on frames: the job's verdict is made with it."""

    def analyse_content(self, images: Iterable[Image]) -> list[bool]:
        """One flag per image, in order: True where the analyser flags the frame."""
        ...


@runtime_checkable
class VoiceExtractor(Protocol):
    """An engine that extracts a job's voice once for all its segments (FaceFusion's lip syncer)."""

    def extract_voice(self, job: EngineJob, out: Path) -> tuple[int, ...]:
        """The voice of `job.audio`, written to `out` (a .npy the engine reads back as `EngineJob.voice`)."""
        ...


@runtime_checkable
class Engine(Protocol):
    name: str

    def prepare(self) -> None:
        """Load models and anything else that is expensive; called once per worker process."""

    def validate(self, job: EngineJob) -> None:
        """Raise EngineError when the job cannot be rendered (e.g. no face in a source image)."""

    def render(self, job: EngineJob, frames: Iterable[Frame]) -> Iterator[Image]:
        """Yield one output image per input frame, in order."""

    def close(self) -> None:
        """Release models, subprocesses and temporary files."""


class StateUnreadable(Exception):
    """A saved temporal state that this engine cannot continue from (another version, damaged)."""


@runtime_checkable
class CarriesState(Protocol):
    """An engine whose frame-to-frame state (trackers, filters) can be saved beside a checkpoint.

    A render resumed from that state continues exactly where the interrupted one stood, so its
    output equals an undisturbed render's bit for bit; without it the worker warms the engine up on
    lead-in frames, which comes close but not exact.
    """

    def save_state(self) -> bytes:
        """The state after the last image the running `render()` yielded (it has not pulled the next frame)."""
        ...

    def load_state(self, state: bytes) -> None:
        """The next `render()` starts from `state` instead of cold; StateUnreadable when it cannot."""
        ...


@runtime_checkable
class ReportsSelection(Protocol):
    """An engine that knows which frames it chose faces to swap in, so a swap that changed nothing is caught."""

    def selected_frames(self) -> frozenset[int]:
        """Indices of the emitted frames of the last `render()` in which it chose at least one face to swap."""


@runtime_checkable
class LooksAhead(Protocol):
    """An engine whose output for a frame depends on frames after it (FaceFusion's face tracker)."""

    def lead_out_frames(self, job: EngineJob) -> int:
        """How many frames past a segment's last it must see: the worker decodes and feeds them, not emitted."""
        ...

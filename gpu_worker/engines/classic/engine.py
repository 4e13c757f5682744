"""The classic engine: a CPU face swap with dlib landmarks, piecewise-affine warping, colour
matching and Poisson blending. No neural face generator: it pastes the source's own face, so it
runs anywhere (CI, CPU workers) and is the fallback where FaceFusion is not installed.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import cv2
import numpy as np

from fusionfleet.jobs.faces import MAX_FACES
from gpu_worker.engines import state as blob
from gpu_worker.engines.base import EngineError, EngineJob, Frame, Image, StateUnreadable
from gpu_worker.engines.classic import identity as ident
from gpu_worker.engines.classic.colour import LabStats
from gpu_worker.engines.classic.models import DlibModels, load_models, release_models
from gpu_worker.engines.classic.presets import Preset, preset_for
from gpu_worker.engines.classic.selector import (
    Descriptor,
    FaceRecord,
    SelectorOptions,
    assign_people,
    face_at,
    select_faces,
    selector_options,
)
from gpu_worker.engines.classic.swap import swap_face
from gpu_worker.engines.classic.tracking import FaceTracker, TrackedFace

LOG = logging.getLogger(__name__)

# Every person of a job with `faces` stays cached across its segments (identities and references).
IDENTITY_CACHE = MAX_FACES
FADE_IN_FRAMES = 4
# Raised whenever what the engine carries from frame to frame changes: an older state is then
# refused and the worker warms the engine up on lead-in frames instead.
STATE_VERSION = 1


def swap_opacity(weight: float) -> float:
    """How much of the swapped face to show for FaceFusion's `face_swapper_weight`.

    FaceFusion mixes the target's embedding into the source's by interp(weight, [0, 1], [0.35,
    -0.35]): its default 0.5 is the pure source, lower weights keep up to 35 % of the target. Pixels
    cannot be extrapolated past the source, so weights above 0.5 show the full swap.
    """
    target_share = max(0.0, float(np.interp(weight, [0.0, 1.0], [0.35, -0.35])))
    return 1.0 - target_share


@dataclass(frozen=True)
class JobSettings:
    preset: Preset
    selector: SelectorOptions
    opacity: float


def job_settings(job: EngineJob) -> JobSettings:
    """The job's preset and FaceFusion options, validated (EngineError on a bad value)."""
    raw_weight = job.option("face_swapper_weight")
    try:
        weight = float(0.5 if raw_weight is None else raw_weight)  # FaceFusion's default
    except (TypeError, ValueError):
        raise EngineError("face_swapper_weight must be a number within 0..1") from None
    if not 0.0 <= weight <= 1.0:
        raise EngineError(f"face_swapper_weight must be within 0..1, not {weight}")
    return JobSettings(preset_for(job.quality), selector_options(job.options), swap_opacity(weight))


@dataclass(frozen=True)
class PersonIdentity:
    """One person of a job with `faces`: the identity that goes on them and their reference face's
    descriptor (None: their reference frame shows no face, so nobody is them, as in FaceFusion)."""

    identity: ident.SourceIdentity
    reference: Descriptor | None


@dataclass
class Temporal:
    """What a render carries from one frame to the next."""

    tracker: FaceTracker
    descriptors: dict[int, Descriptor] = field(default_factory=dict)
    colour: dict[int, LabStats | None] = field(default_factory=dict)
    first_track_ids: set[int] | None = None
    # Picked from a frame when the job has no reference picture (an engine used on its own).
    frame_reference: Descriptor | None = None

    def dump(self) -> bytes:
        tracker_fields, tracker_arrays = self.tracker.state()
        arrays = {f"tracker.{name}": value for name, value in tracker_arrays.items()}
        arrays |= {f"descriptor.{key}": value for key, value in self.descriptors.items()}
        for key, stats in self.colour.items():
            if stats is not None:
                arrays |= {f"colour.{key}.mean": stats.mean, f"colour.{key}.std": stats.std}
        if self.frame_reference is not None:
            arrays["frame_reference"] = self.frame_reference
        fields = {
            "engine": "classic",
            "version": STATE_VERSION,
            "tracker": tracker_fields,
            "descriptors": sorted(self.descriptors),
            "colour": sorted(self.colour),
            "first_track_ids": None if self.first_track_ids is None else sorted(self.first_track_ids),
        }
        return blob.pack(fields, arrays)

    def restore(self, fields: dict[str, Any], arrays: blob.Arrays) -> None:
        """KeyError when the state is incomplete."""
        prefix = "tracker."
        self.tracker.restore(
            fields["tracker"], {name[len(prefix) :]: v for name, v in arrays.items() if name.startswith(prefix)}
        )
        self.descriptors = {int(key): arrays[f"descriptor.{key}"] for key in fields["descriptors"]}
        self.colour = {
            int(key): LabStats(arrays[f"colour.{key}.mean"], arrays[f"colour.{key}.std"])
            if f"colour.{key}.mean" in arrays
            else None
            for key in fields["colour"]
        }
        first = fields["first_track_ids"]
        self.first_track_ids = None if first is None else {int(key) for key in first}
        self.frame_reference = arrays.get("frame_reference")


class ClassicEngine:
    name = "classic"

    def __init__(self) -> None:
        self._models: DlibModels | None = None
        self._identities: OrderedDict[tuple[object, ...], ident.SourceIdentity] = OrderedDict()
        self._references: dict[tuple[object, ...], Descriptor] = {}
        self._selected: set[int] = set()
        self._temporal: Temporal | None = None
        self._resume: tuple[dict[str, Any], blob.Arrays] | None = None

    def prepare(self) -> None:
        self._models = load_models()

    @property
    def models(self) -> DlibModels:
        if self._models is None:
            self.prepare()
        assert self._models is not None
        return self._models

    def identity(self, job: EngineJob, preset: Preset) -> ident.SourceIdentity:
        """The job's source identity, built once and reused for the job's other segments."""
        return self._identity_of(job.sources, preset)

    def _identity_of(self, sources: tuple[Image, ...], preset: Preset) -> ident.SourceIdentity:
        key = ident.source_key(sources, preset.forehead)
        cached = self._identities.get(key)
        if cached is None:
            cached = ident.build_identity(self.models, sources, preset.forehead)
            self._identities[key] = cached
            while len(self._identities) > IDENTITY_CACHE:
                self._identities.popitem(last=False)
        self._identities.move_to_end(key)
        return cached

    def reference_from_image(self, job: EngineJob, options: SelectorOptions) -> Descriptor | None:
        """The identity of the face at reference_face_position in `job.reference` (cached)."""
        if job.reference is None:
            return None
        return self._reference_of(job.reference, job.reference_is_frame, options.order, options.reference_position)

    def _reference_of(self, image: Image, is_frame: bool, order: str, position: int) -> Descriptor | None:
        key = (ident.source_key((image,), 0.0), order, position)
        cached = self._references.get(key)
        if cached is not None:
            return cached
        faces = ident.faces_in_image(self.models, image)
        records = [FaceRecord(i, f.box, f.score) for i, f in enumerate(faces)]
        chosen = face_at(records, order, position)
        if chosen is None:
            if is_frame:
                return None  # FaceFusion: no reference face, nobody matches it
            raise EngineError("the reference image has no detectable face")
        descriptor = ident.describe(self.models, image, faces[chosen.key].points)
        self._references[key] = descriptor
        while len(self._references) > IDENTITY_CACHE:
            self._references.pop(next(iter(self._references)))
        return descriptor

    def people(self, job: EngineJob, settings: JobSettings) -> list[PersonIdentity]:
        """Each person of a job with `faces`, from the job-level references: the same in every segment."""
        if settings.selector.mode != "reference":
            raise EngineError("faces: each person is picked by a reference face: face_selector_mode must be reference")
        people = []
        for index, person in enumerate(job.people):
            try:
                identity = self._identity_of(person.sources, settings.preset)
                reference = self._reference_of(
                    person.reference, person.reference_is_frame, settings.selector.order, person.position
                )
            except EngineError as error:
                raise EngineError(f"faces[{index}]: {error.reason}") from error
            people.append(PersonIdentity(identity, reference))
        return people

    def validate(self, job: EngineJob) -> None:
        settings = job_settings(job)
        if job.people:
            self.people(job, settings)
            return
        self.identity(job, settings.preset)
        if settings.selector.mode == "reference":
            self.reference_from_image(job, settings.selector)

    def selected_frames(self) -> frozenset[int]:
        return frozenset(self._selected)

    def save_state(self) -> bytes:
        if self._temporal is None:
            raise RuntimeError("no render is running: there is no state to save")
        return self._temporal.dump()

    def load_state(self, state: bytes) -> None:
        fields, arrays = blob.unpack(state)
        if fields.get("engine") != "classic" or fields.get("version") != STATE_VERSION:
            raise StateUnreadable(
                f"engine state of {fields.get('engine')!r} version {fields.get('version')!r}, "
                f"not classic version {STATE_VERSION}"
            )
        self._resume = fields, arrays

    def _start_temporal(self, job: EngineJob, preset: Preset) -> Temporal:
        temporal = Temporal(FaceTracker(self.models, preset, job.fps))
        resume, self._resume = self._resume, None
        if resume is not None:
            try:
                temporal.restore(*resume)
            except (KeyError, TypeError, ValueError) as error:
                # Unreachable with a state of this version; a cold start still renders the chunk.
                LOG.warning("engine state incomplete (%s): starting cold", error)
                temporal = Temporal(FaceTracker(self.models, preset, job.fps))
        return temporal

    def render(self, job: EngineJob, frames: Iterable[Frame]) -> Iterator[Image]:
        settings = job_settings(job)
        people = self.people(job, settings) if job.people else None
        source = people[0].identity if people else self.identity(job, settings.preset)
        reference = None
        if settings.selector.mode == "reference" and people is None:
            reference = self.reference_from_image(job, settings.selector)
        temporal = self._temporal = self._start_temporal(job, settings.preset)
        if reference is None:
            reference = temporal.frame_reference
        tracker, descriptors, colour_state = temporal.tracker, temporal.descriptors, temporal.colour
        self._selected = set()
        for frame in frames:
            image = frame.image
            if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
                raise EngineError(f"frame {frame.index} is not a BGR uint8 image")
            gray = np.asarray(cv2.cvtColor(image, cv2.COLOR_BGR2GRAY), dtype=np.uint8)
            faces = tracker.update(gray)
            if temporal.first_track_ids is None:
                # Faces present from the segment's first frame show fully at once (the previous
                # segment ended showing them); only faces appearing later fade in.
                temporal.first_track_ids = {face.track_id for face in faces}
            first_track_ids = temporal.first_track_ids
            if settings.selector.mode == "reference":
                for face in faces:
                    # A re-found track may be someone else (a cut to another person at that place).
                    if face.track_id not in descriptors or face.refreshed:
                        descriptors[face.track_id] = ident.describe(self.models, image, face.landmarks)
                # Only without any reference picture (an engine used on its own): the fleet and `swap`
                # always give one, so every segment matches the same person.
                if reference is None and job.reference is None and people is None and frame.emit and faces:
                    reference = temporal.frame_reference = self._reference_from_frame(
                        faces, descriptors, settings.selector
                    )
            records = [FaceRecord(f.track_id, f.box, f.score, descriptors.get(f.track_id)) for f in faces]
            # Several people: each face goes to the person whose job-level reference it is nearest.
            assigned = (
                assign_people(records, [p.reference for p in people], settings.selector.dlib_threshold)
                if people is not None
                else {}
            )
            chosen = (
                set(assigned)
                if people is not None
                else {record.key for record in select_faces(records, settings.selector, reference)}
            )
            if not chosen:
                yield image
                continue
            if frame.emit:
                self._selected.add(frame.index)
            out = image
            for face in (f for f in faces if f.track_id in chosen):
                fade = 1.0 if face.track_id in first_track_ids else min(1.0, (face.age + 1) / FADE_IN_FRAMES)
                result = swap_face(
                    out,
                    image,
                    (people[assigned[face.track_id]].identity if people is not None else source).face,
                    face.landmarks,
                    preset=settings.preset,
                    opacity=settings.opacity * fade,
                    previous_stats=colour_state.get(face.track_id),
                )
                out, colour_state[face.track_id] = result.frame, result.target_stats
            yield out

    @staticmethod
    def _reference_from_frame(
        faces: list[TrackedFace], descriptors: dict[int, Descriptor], options: SelectorOptions
    ) -> Descriptor | None:
        """FaceFusion's fallback reference: the face at reference_face_position in this frame."""
        records = [FaceRecord(f.track_id, f.box, f.score, descriptors.get(f.track_id)) for f in faces]
        chosen = face_at(records, options.order, options.reference_position)
        if chosen is None or chosen.descriptor is None:
            return None
        LOG.info("reference face: track %d of the segment's first frame", chosen.key)
        return chosen.descriptor

    def close(self) -> None:
        self._temporal = self._resume = None
        self._identities.clear()
        self._references.clear()
        self._models = None
        release_models()

"""A job's chained passes as the warm FaceFusion process runs them (`warm_chain.py`), built here. Pure.

`faces` on FaceFusion's engine: FaceFusion swaps one source face per run and picks the faces to swap by
one reference face, so several people are several runs, each on the one before's output (what its
`job-remix-step` chains, and what a user does by hand). The farm runs them as passes, one per person,
inside one render of each segment: the person's sources (FaceFusion averages several, as in any run),
the job's options, and as the pass's reference the person's reference face, decided once per job (their
image, or the frame of the ORIGINAL target the slicer decoded) at `reference_face_position`.

A mapping with options of its own is a step of a FaceFusion job file's chain (swap, then enhance): its pass
runs with them, and its reference face is read as FaceFusion's job-run reads a remix step's, from the
reference frame as the passes before left it (`after_passes`: the warm process runs the frame through them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from gpu_worker.engines.base import EngineJob, Image
from gpu_worker.engines.facefusion.job_options import look_ahead


@dataclass(frozen=True)
class ChainPass:
    """One FaceFusion run of a chain: its sources, the picture its reference face is read from, its options.

    `after_passes`: the reference picture is a frame of the original target that the passes before this one
    change first (a job file's remix step reads its reference from the step before's output)."""

    sources: tuple[Image, ...]
    reference: Image
    options: Mapping[str, object]
    after_passes: bool = False


def passes_of(job: EngineJob, options: Mapping[str, object]) -> tuple[ChainPass, ...]:
    """The passes a job renders in one segment; () where it is one ordinary run (no `faces`)."""
    return tuple(
        ChainPass(
            sources=person.sources,
            reference=person.reference,
            # The person's own position in their reference; the frame's number is the slicer's, not FaceFusion's.
            options=MappingProxyType({**(person.options or options), "reference_face_position": person.position}),
            after_passes=person.options is not None and person.reference_is_frame,
        )
        for person in job.people
    )


def chain_look_ahead(job: EngineJob) -> int:
    """Frames after a frame that the last pass's output depends on: each pass's tracker looks its own window
    on at the pass before's outputs, which looked theirs on themselves (one run: its window)."""
    if not job.people:
        return look_ahead(job.options)
    return sum(look_ahead(job.options if person.options is None else person.options) for person in job.people)

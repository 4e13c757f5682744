"""A job's chained passes as the warm FaceFusion process runs them (`warm_chain.py`), built here. Pure.

`faces` on FaceFusion's engine: FaceFusion swaps one source face per run and picks the faces to swap by
one reference face, so several people are several runs, each on the one before's output (what its
`job-remix-step` chains, and what a user does by hand). The farm runs them as passes, one per person,
inside one render of each segment: the person's sources (FaceFusion averages several, as in any run),
the job's options, and as the pass's reference the person's reference face, decided once per job (their
image, or the frame of the ORIGINAL target the slicer decoded) at `reference_face_position`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from gpu_worker.engines.base import EngineJob, Image


@dataclass(frozen=True)
class ChainPass:
    """One FaceFusion run of a chain: its sources, the picture its reference face is read from, its options."""

    sources: tuple[Image, ...]
    reference: Image
    options: Mapping[str, object]


def passes_of(job: EngineJob, options: Mapping[str, object]) -> tuple[ChainPass, ...]:
    """The passes a job renders in one segment; () where it is one ordinary run (no `faces`)."""
    return tuple(
        ChainPass(
            sources=person.sources,
            reference=person.reference,
            # The person's own position in their reference; the frame's number is the slicer's, not FaceFusion's.
            options=MappingProxyType({**options, "reference_face_position": person.position}),
        )
        for person in job.people
    )


def chain_look_ahead(window: int, passes: int) -> int:
    """Frames after a frame that the last pass's output depends on: each pass's tracker looks `window`
    frames on at the pass before's outputs, which looked `window` on themselves."""
    return window * max(1, passes)

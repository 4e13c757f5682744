"""Which decisions each engine makes once per job rather than per segment.

FaceFusion makes some decisions once per video; made per segment they diverge (a segment that starts
on someone else picks them as the reference; a segment with one flagged frame among its two samples
is refused). An engine declares them here; the slicer prepares each (or says where it will be kept)
before the segments render, and every segment reads the same one:

- `reference_frame`: frame `reference_frame_number` of the whole target, decoded by the slicer
  (fusionfleet.facefusion.reference);
- `content_analysis`: FaceFusion's content-analyser verdict over the whole target, computed once by
  the first worker that needs it (it needs FaceFusion's models, which only the workers carry) and kept
  at `work/<job>/content-analysis.json` (fusionfleet.facefusion.content_analysis, gpu_worker/rendering/job_analysis.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from fusionfleet.jobs.manifest import ENGINE_NAMES

REFERENCE_FRAME = "reference_frame"
CONTENT_ANALYSIS = "content_analysis"

JOB_LEVEL: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "facefusion": frozenset({REFERENCE_FRAME, CONTENT_ANALYSIS}),
        # The built-in engine follows FaceFusion's selector; it has no content analyser.
        "classic": frozenset({REFERENCE_FRAME}),
        "copy": frozenset(),
    }
)
assert set(JOB_LEVEL) == set(ENGINE_NAMES), "every engine declares its job-level decisions"


def job_level(engine: str) -> frozenset[str]:
    return JOB_LEVEL.get(engine, frozenset())

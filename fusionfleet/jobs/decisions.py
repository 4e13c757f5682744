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

from collections.abc import Callable, Mapping
from types import MappingProxyType

from fusionfleet.facefusion.catalogue import DEFAULTS
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


def tracker_window(options: Mapping[str, object]) -> int:
    """Frames each side of a frame that FaceFusion's output for it depends on: with the face tracker on
    (face_tracker_score > 0, face_selector.select_faces) it tracks faces `target_frame_amount` frames both
    ways; otherwise only the frame itself counts. 0 is an amount like any other. (The worker's lead-out,
    gpu_worker.engines.facefusion.job_options.look_ahead, is this same window's far side.)"""
    if float(str(options.get("face_tracker_score", DEFAULTS["face_tracker_score"]))) <= 0:
        return 0
    return int(str(options.get("target_frame_amount", DEFAULTS["target_frame_amount"])))


# A test render renders frame k from the frames its pixels depend on (fusionfleet.jobs.trial). Each engine
# declares how many frames before k those are, given the job's options, beside the job-level decisions
# above (made once, so no frame before k is needed for them); None: the engine carries state from frame
# to frame (gpu_worker.engines.base.CarriesState with a state that is not empty), so frame k depends on
# every frame from its segment's start. tests/unit/test_trial_plan.py holds these to the engines.
CONTEXT: Mapping[str, Callable[[Mapping[str, object]], int | None]] = MappingProxyType(
    {
        "facefusion": tracker_window,  # stateless but for the tracker's window (warm or per-segment)
        "classic": lambda options: None,  # its tracker and colour filters run from the segment's start
        "copy": lambda options: 0,
    }
)
assert set(CONTEXT) == set(ENGINE_NAMES), "every engine declares the frames a frame depends on"


def context_frames(engine: str, options: Mapping[str, object]) -> int | None:
    """Frames before a frame that `engine`'s output for it depends on, or None (from its segment's start);
    an engine that declares nothing is taken to carry state."""
    declared = CONTEXT.get(engine)
    return None if declared is None else declared(options)

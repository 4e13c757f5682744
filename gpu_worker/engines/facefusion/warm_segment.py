"""What a warm segment's single run and its chained passes (`warm_server.py`, `warm_chain.py`) share: the
picture the processors work on, and the reply that ends a segment. Loaded beside them under FaceFusion's
interpreter (standard library, numpy and FaceFusion only).
"""

from __future__ import annotations

from typing import Any

import numpy as np

FACE_STORE_LIMIT = 2000  # frames whose faces FaceFusion keeps (a few segments' worth)


def temp_frame(frame: np.ndarray, scale: float) -> np.ndarray:
    """The picture the processors work on: the frame at the output size, as FaceFusion's
    workflows.to_video.process_memory_frame makes it (its neighbours stay as they are)."""
    import cv2
    from facefusion.vision import scale_resolution

    height, width = frame.shape[:2]
    size = scale_resolution((width, height), scale)
    size = min(size, (width, height))  # vision.restrict_video_resolution compares the pairs
    if size == (width, height):
        return frame.copy()
    return cv2.resize(frame, size)


def finish(
    engine: Any, loads_before: int, new_options: bool, phases: dict[str, float], **counts: int
) -> dict[str, Any]:
    """The reply that ends a segment (a single run's or a chain's), once its processors' post-processing ran:
    what it cost in sessions, and what `counts` says (frames, sampled, flagged, …)."""
    from facefusion import face_store

    # FaceFusion keeps every frame's faces for the whole run and never clears them; a long-lived
    # process must, but not every segment: the job's source faces stay found.
    if len(face_store.FACE_STORE) > FACE_STORE_LIMIT:
        face_store.clear_faces()
    # A new option set's first segment has asked for every model it uses: the others' sessions go.
    released = engine.release_unused_pools() if new_options else []
    return {
        "op": "done",
        **counts,
        "session_loads": engine.session_loads - loads_before,
        "session_loads_total": engine.session_loads,
        "session_models": engine.loaded[loads_before:],
        "phases": phases,
        "pre_checked": new_options,
        "released": released,
    }

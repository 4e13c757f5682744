"""The tests' view of FaceFusion's development harness (fleetctl/harness): its folder and pictures,
and clips of them as the engines take them (gpu_worker's Frame)."""

from __future__ import annotations

from fleetctl.harness.facefusion import REPO, Harness, prepare, skip_reason
from fleetctl.harness.pictures import BOX, SIZE, clip_images, face_core, face_image, outside_face, red_image
from gpu_worker.engines.base import Frame

__all__ = ["BOX", "REPO", "SIZE", "Harness", "clip", "face_core", "face_image", "outside_face", "prepare",
           "red_image", "skip_reason"]  # fmt: skip


def clip(count: int, start: int = 0) -> list[Frame]:
    """`count` frames of the harness's face from frame `start`, each carrying its number."""
    return [Frame(index=start + offset, image=image) for offset, image in enumerate(clip_images(count, start))]

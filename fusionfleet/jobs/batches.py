"""A batch: one manifest with `targets`, one ordinary job per target (an item), one summary at the end.

The batch's record (`work/<batch>/batch.json`) keeps what its items share and where each one's output
goes; each item is a job like any other, `<batch id>.<index>` (fusionfleet.jobs.ids), with its own plan,
segments, attempts, retries and read model. Items start a window at a time (fusionfleet.fleet.fairness
`batch_window`) and each one's end starts the next, so a 500-item batch neither fills the queues ahead of
everyone else nor asks Step Functions, the slicer or a tenant's limits for 500 jobs at once. Pure, but
for the record's model and the listing of open batches.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from fusionfleet import batch_layout
from fusionfleet.adapters.storage import Storage
from fusionfleet.jobs.ids import item_id
from fusionfleet.jobs.image_output import IMAGE_EXTENSIONS, extension_of
from fusionfleet.jobs.manifest import Manifest
from fusionfleet.messages import ObjectRef

# What a prefix in `targets` takes: the media FaceFusion reads (images) and the farm's video containers.
VIDEO_EXTENSIONS = (".mp4", ".m4v", ".mov", ".mkv", ".webm")
MEDIA_EXTENSIONS = (*VIDEO_EXTENSIONS, *IMAGE_EXTENSIONS)


class BatchTarget(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    index: int
    key: str
    output_stem: str  # the item's output key without its extension (`.mp4`, or the image's own)


class BatchRecord(BaseModel):
    """`work/<batch>/batch.json`, written once by the slicer; a reader ignores fields a newer writer added."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    batch_id: str
    tenant: str | None = None
    manifest: ObjectRef
    output_prefix: str
    priority: str = "normal"
    submitted_at: str = ""
    item_notices: bool = False
    targets: tuple[BatchTarget, ...]
    # The validated manifest but its targets and output: what every item shares, kept as it was read
    # (the manifest's key may be overwritten while the batch runs; its items stay one batch).
    settings: dict[str, Any]

    def item_id(self, index: int) -> str:
        return item_id(self.batch_id, index)

    def item_manifest(self, target: BatchTarget) -> Manifest:
        """Item `target`'s manifest: the batch's sources, options and priority on its one target."""
        return Manifest.model_validate({**self.settings, "target": target.key, "targets": [], "output": None})


def takes(key: str) -> bool:
    """Whether a key listed under a `targets` prefix is media a batch renders (by its extension)."""
    return extension_of(key) in MEDIA_EXTENSIONS


def expand_targets(named: Sequence[str], listed: dict[str, list[str]]) -> list[str]:
    """The batch's targets in order: each key as named, each prefix's media keys (`listed[prefix]`) sorted;
    a key named twice (or under two prefixes) once, where it first came."""
    seen: set[str] = set()
    keys = []
    for entry in named:
        for key in sorted(k for k in listed[entry] if takes(k)) if entry.endswith("/") else [entry]:
            if key not in seen:
                seen.add(key)
                keys.append(key)
    return keys


def output_stems(keys: Iterable[str], prefix: str) -> list[str]:
    """Each target's output under the batch's prefix, without the extension: its own name, made unique
    by its index where two targets share a name (`a.jpg` under two prefixes)."""
    stems = []
    taken: set[str] = set()
    for index, key in enumerate(keys):
        name = key.rsplit("/", 1)[-1]
        stem = name[: -len(extension_of(key))] if extension_of(key) else name
        candidate = f"{prefix}{stem}"
        if candidate in taken:
            candidate = f"{prefix}{stem}-{index:04d}"
        taken.add(candidate)
        stems.append(candidate)
    return stems


@dataclass(frozen=True)
class Room:
    """How many more items may start now, and why no more."""

    items: int
    why: str = ""


def room(window: int, running_items: int, limits: Sequence[tuple[int, int, str]]) -> Room:
    """Items to start: up to the batch's window, within each (limit, running, name) the stack and the
    tenant set (0: none), each keeping one job's place free for a job of its own when it allows more
    than one, so a batch never makes another job be refused for a full stack or tenant."""
    free = window - running_items
    why = f"its window of {window} items at once is full"
    for limit, running, name in limits:
        if not limit:
            continue
        spare = limit - running - (1 if limit > 1 else 0)
        if spare < free:
            free, why = spare, f"the {name} runs {running} of its {limit} jobs at once"
    return Room(max(0, free), why)


def open_batches(storage: Storage, bucket: str) -> list[str]:
    """The batches whose summary has not been sent (one LIST): the watchdog ticks each."""
    return [batch for key in storage.list_keys(bucket, batch_layout.OPEN_BATCHES_PREFIX)
            if (batch := batch_layout.parse_open_batch_key(key)) is not None]  # fmt: skip

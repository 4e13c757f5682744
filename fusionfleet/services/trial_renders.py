"""A test render of a job that exists: the same sources, target and options, a few of its frames.

The operator's dashboard offers it on a job's page: a new manifest beside the job's own, with the job's
settings and `frames` (fusionfleet.jobs.trial), so the frames come out as the whole job renders them.
The webhook fields are left out (the job's receiver never asked for these events), and a batch item's
test render names its own target, not the batch's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fusionfleet import layout
from fusionfleet.adapters.storage import Storage
from fusionfleet.errors import JobRejected, ObjectMissing, OperationRefused
from fusionfleet.jobs.acceptance import accept
from fusionfleet.jobs.ids import job_id as derive_job_id
from fusionfleet.jobs.manifest import parse_manifest
from fusionfleet.jobs.reader import JobReader
from fusionfleet.messages import ObjectRef

# Fields of the job's manifest that do not carry over to its test render (a poster strip's `spread_frames`:
# the frames asked replace the frames it chose).
DROPPED = ("output", "targets", "item_notices", "webhook", "webhook_events", "metadata", "spread_frames")


def trial_manifest(manifest: dict[str, Any], target: str, frames: Sequence[int]) -> dict[str, Any]:
    """The job's manifest made a test render of `frames` of `target`. Pure."""
    kept = {name: value for name, value in manifest.items() if name not in DROPPED}
    return {**kept, "target": target, "frames": list(frames)}


@dataclass
class TrialRenders:
    storage: Storage
    reader: JobReader
    clock: Callable[[], float] = field(default=time.time)

    def start(self, job_id: str, frames: Sequence[int]) -> str:
        """Drop the test render's manifest; returns its job id. A job not yet sliced, or whose manifest
        is gone, is refused; the new manifest is judged as the slicer will judge it before it is written."""
        context = self.reader.records.facts(job_id).context
        if context is None:
            raise OperationRefused(f"job {job_id} has not been read by the slicer yet: its target is not known")
        source = context.manifest
        try:
            manifest = json.loads(self.storage.get_bytes(source.bucket, source.key))
        except ObjectMissing as error:
            raise OperationRefused(f"job {job_id}'s manifest {source.key} is gone") from error
        stamp = datetime.fromtimestamp(self.clock(), UTC).strftime("%Y%m%d-%H%M%S")
        name = f"{source.key.rsplit('/', 1)[-1].removesuffix(layout.MANIFEST_SUFFIX)}-try-{stamp}"
        key = layout.manifest_key(name, layout.tenant_of(source.key))
        body = json.dumps(trial_manifest(manifest, context.target.key, frames), indent=2).encode()
        try:
            parse_manifest(body, key)
        except JobRejected as rejected:
            raise OperationRefused(rejected.reason) from rejected
        etag = self.storage.put_bytes(source.bucket, key, body, "application/json")
        job_id = derive_job_id(source.bucket, key, etag)
        # Its page opens at once: PENDING, not unknown, until the slicer takes it (fusionfleet.jobs.acceptance).
        ref = ObjectRef(bucket=source.bucket, key=key, etag=etag)
        accept(self.storage, self.reader.records.bucket, job_id, ref, json.loads(body))
        return job_id

    def frames(self, job_id: str) -> list[int]:
        """The frames of a test render that succeeded, in the order asked; [] for any other job."""
        facts = self.reader.records.facts(job_id)
        if facts.context is None or not facts.context.trial_frames or self.reader.view(job_id).output is None:
            return []
        return list(facts.context.trial_frames)

    def picture(self, job_id: str, frame: int) -> bytes | None:
        """The PNG of one frame of a test render that succeeded, or None (not one of its frames, not yet)."""
        if frame not in self.frames(job_id):
            return None
        found = self.reader.view(job_id).output_object
        if found is None:
            return None
        bucket, prefix = found
        try:
            return self.storage.get_bytes(bucket, layout.trial_frame_key(prefix, frame))
        except ObjectMissing:
            return None

"""A manifest accepted and not yet sliced: from that moment its job (or batch) exists, PENDING.

The id of a job is derived from its manifest object (`fusionfleet.jobs.ids`), which no reader can find
from the id alone; the slicer's records (the job record, a batch's record) come only once the slicer
has taken the manifest, which may be seconds later (a queue, a cold start, the target's probe). So
whoever writes a manifest and hands its id to a person (the CLI's `submit` and `try`, the dashboard's
test render) records the acceptance at once, before the id is shown: `work/<id>/accepted.json` with
what the manifest says (name, target or targets, priority), and the job's entry in the job index
(`index_layout`, the same entry the slicer writes, from the manifest's own upload time). The read model
(`fusionfleet.jobs.facts`, `batch_reader`, `reader`) reads it only where the slicer's records are
absent: it is PENDING while its manifest is still there, and unknown once the manifest is gone (the
slicer takes no manifest that is gone).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from fusionfleet import layout
from fusionfleet.adapters.storage import Storage, get_json, put_json
from fusionfleet.errors import ObjectMissing, ObjectRefused
from fusionfleet.jobs import summary
from fusionfleet.messages import ObjectRef


class Acceptance(BaseModel):
    """`work/<id>/accepted.json`: a reader ignores fields a newer writer added."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    job_id: str
    batch: bool = False
    manifest: ObjectRef
    # The target, or a batch's targets as its manifest names them (keys, and prefixes ending in '/').
    targets: tuple[str, ...] = ()
    priority: str = "normal"
    submitted_at: str = ""
    frames: tuple[int, ...] = ()  # a test render's

    @property
    def name(self) -> str:
        return layout.manifest_name(self.manifest.key)

    @property
    def items_known(self) -> bool:
        """Whether its targets are its items one for one (no prefix, whose media the slicer lists)."""
        return self.batch and not any(target.endswith("/") for target in self.targets)


def _strings(value: Any) -> tuple[str, ...]:
    values = value if isinstance(value, list) else [value]
    return tuple(str(item) for item in values if isinstance(item, str) and item)


def accept(
    storage: Storage, work_bucket: str, job_id: str, manifest_ref: ObjectRef, manifest: Mapping[str, Any]
) -> Acceptance:
    """Record the manifest just written (`manifest_ref`, its ETag the one its id was derived from) as
    accepted for `job_id`, and list it in the job index; returns the record."""
    info = storage.head(manifest_ref.bucket, manifest_ref.key)
    batch = bool(manifest.get("targets"))
    frames = manifest.get("frames") or []
    record = Acceptance(
        job_id=job_id, batch=batch, manifest=manifest_ref,
        targets=_strings(manifest.get("targets") if batch else manifest.get("target")),
        priority=str(manifest.get("priority") or "normal"),
        # The object's own upload time, as the slicer reads it: both write the same index entry.
        submitted_at=info.last_modified.isoformat(),
        frames=tuple(int(frame) for frame in frames if isinstance(frame, int)),
    )  # fmt: skip
    put_json(storage, work_bucket, layout.accepted_key(job_id), record.model_dump(mode="json"))
    summary.index_entry(storage, work_bucket, job_id, summary.submitted_ms(record.submitted_at))
    return record


def read_acceptance(storage: Storage, work_bucket: str, job_id: str) -> Acceptance | None:
    """The job's acceptance while its manifest is still the one accepted; None when there is none, or
    when the manifest is gone or was replaced (the slicer will never take it: the id names nothing)."""
    try:
        record = Acceptance.model_validate(get_json(storage, work_bucket, layout.accepted_key(job_id)))
    except (ObjectMissing, ObjectRefused):
        return None
    except ValueError:
        return None  # unreadable: as if absent
    try:
        info = storage.head(record.manifest.bucket, record.manifest.key)
    except ObjectMissing:
        return None
    except ObjectRefused:
        return record  # a reader that may not see the manifest takes the record's word for it
    return record if not record.manifest.etag or info.etag == record.manifest.etag else None

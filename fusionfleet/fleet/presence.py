"""The render fleet as the work bucket shows it: workers' presence records (`work/_workers/`).

Read by the slicer to size plans. One LIST answers most questions: a fleet with no more records than
its configured maximum is planned for that maximum without reading any record.
"""

from __future__ import annotations

from fusionfleet import layout
from fusionfleet.adapters.storage import Storage
from fusionfleet.errors import ObjectMissing
from fusionfleet.jobs.sizing import FleetView
from fusionfleet.messages import WorkerBeat

RENDER_ROLE = "render"


def live_render_workers(storage: Storage, bucket: str, now: float, lost_after_s: float) -> list[str]:
    """The names of render workers whose presence record was refreshed within `lost_after_s`."""
    names = []
    for key in storage.list_keys(bucket, layout.WORKERS_PREFIX):
        try:
            beat = WorkerBeat.model_validate_json(storage.get_bytes(bucket, key))
        except (ObjectMissing, ValueError):
            continue  # gone since the listing (a clean exit), or not a presence record
        if beat.role == RENDER_ROLE and now - beat.last_beat <= lost_after_s:
            names.append(beat.name)
    return names


def running_render_workers(storage: Storage, bucket: str, now: float, lost_after_s: float) -> int:
    """How many render workers refreshed their presence record within `lost_after_s`."""
    return len(live_render_workers(storage, bucket, now, lost_after_s))


def fleet_view(storage: Storage, bucket: str, maximum: int, now: float, lost_after_s: float = 30.0) -> FleetView:
    """The fleet a new job will meet: `maximum` unless more render workers than that are alive."""
    records = len(storage.list_keys(bucket, layout.WORKERS_PREFIX))
    if records <= maximum:
        # Not more records than the maximum, so not more live workers either: the plan is for the maximum.
        return FleetView(running=records, maximum=maximum)
    return FleetView(running=running_render_workers(storage, bucket, now, lost_after_s), maximum=maximum)

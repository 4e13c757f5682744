"""The workers as people see them (`fusionfleet workers`, the operator's dashboard): their presence records."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from fusionfleet import layout
from fusionfleet.adapters.storage import Storage
from fusionfleet.errors import ObjectMissing
from fusionfleet.messages import WorkerBeat

DEFAULT_LOST_AFTER_S = 30.0
# Workers lost for longer than this (replaced hosts, old ECS tasks) are no longer listed.
FORGET_AFTER_S = 24 * 3600.0


@dataclass(frozen=True)
class WorkerView:
    name: str
    role: str
    engine: str
    current: str | None  # `<job_id>:<segment>` or `<job_id>:merge` while it works
    segments_done: int
    last_heartbeat: datetime
    lost: bool


def worker_views(
    storage: Storage, bucket: str, now: float, lost_after_s: float = DEFAULT_LOST_AFTER_S,
    forget_after_s: float = FORGET_AFTER_S,
) -> list[WorkerView]:  # fmt: skip
    """Every worker with a presence record; one whose last beat is older than `lost_after_s` is lost.

    Alive workers first, then lost ones; a worker lost for more than `forget_after_s` is left out.
    """
    views = []
    for key in storage.list_keys(bucket, layout.WORKERS_PREFIX):
        try:
            beat = WorkerBeat.model_validate_json(storage.get_bytes(bucket, key))
        except ObjectMissing:
            continue  # it exited cleanly between the listing and the read
        except ValueError:
            continue  # not a presence record
        if now - beat.last_beat > forget_after_s:
            continue
        views.append(
            WorkerView(
                name=beat.name,
                role=beat.role,
                engine=beat.engine,
                current=beat.current,
                segments_done=beat.segments_done,
                last_heartbeat=datetime.fromtimestamp(beat.last_beat, UTC),
                lost=now - beat.last_beat > lost_after_s,
            )
        )
    return sorted(views, key=lambda view: (view.lost, view.role, view.name))

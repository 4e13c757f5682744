"""Runs of a job: the first execution is named after the job, each retry gets a run number.

Executions are `<job_id>` (run 0), then `<job_id>--r1`, `<job_id>--r2`, …: one job id for people,
the client and the bucket layout; one execution per run for Step Functions, whose names cannot be
reused. The job's current run is recorded in `work/<job_id>/run.json`; a job without that record
is on run 0. An operator's cancel leaves a marker that workers check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fusionfleet import layout
from fusionfleet.adapters.storage import Storage, get_json, put_json
from fusionfleet.errors import ObjectMissing

RUN_SEPARATOR = "--r"
MAX_EXECUTION_NAME = 80  # Step Functions' limit
_RUN_SUFFIX = re.compile(r"^(?P<job>.+)--r(?P<run>[1-9][0-9]{0,3})$")


def execution_name(job_id: str, run: int) -> str:
    """The execution of `run`; a job id too long for the suffix is cut (see `parse_execution_name`)."""
    if run == 0:
        return job_id
    suffix = f"{RUN_SEPARATOR}{run}"
    return job_id[: MAX_EXECUTION_NAME - len(suffix)] + suffix


def parse_execution_name(name: str) -> tuple[str, int]:
    """`clip-abc--r2` → (`clip-abc`, 2); a name without a run suffix is run 0. Pure.

    Job ids are slugs whose dashes never come in pairs, so `--r<n>` can only be a run suffix. A job
    id of more than 76 characters was cut to fit its retry's name: the id returned is then a prefix
    of the real one, which the execution's input (`job.job_id`) carries in full.
    """
    match = _RUN_SUFFIX.match(name)
    if match is None:
        return name, 0
    return match["job"], int(match["run"])


@dataclass(frozen=True)
class RunRecord:
    run: int
    segments: tuple[int, ...] = ()  # the segments this run renders (empty for run 0: all of them)
    started_at: str = ""


def current_run(storage: Storage, bucket: str, job_id: str) -> RunRecord:
    try:
        value = get_json(storage, bucket, layout.run_key(job_id))
    except ObjectMissing:
        return RunRecord(0)
    return RunRecord(
        run=int(value.get("run", 0)),
        segments=tuple(int(index) for index in value.get("segments", ())),
        started_at=str(value.get("started_at", "")),
    )


def record_run(storage: Storage, bucket: str, job_id: str, record: RunRecord) -> None:
    """Make `record` the job's current run (what `current_run` reads back)."""
    value = {"run": record.run, "segments": list(record.segments), "started_at": record.started_at}
    put_json(storage, bucket, layout.run_key(job_id), value)


def is_cancelled(storage: Storage, bucket: str, job_id: str) -> bool:
    try:
        storage.head(bucket, layout.cancel_key(job_id))
    except ObjectMissing:
        return False
    return True

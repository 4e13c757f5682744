"""The work bucket's job index, its key format both ways (as fusionfleet/layout.py for a job's records).

One empty marker per job (written by the slicer, `fusionfleet.jobs.summary`) whose name sorts newest
first: milliseconds since the epoch counted down from JOB_INDEX_END. So one listing pages through the
farm's jobs in order, and a page's cursor is the last key it read. It lives under a name a job id never
has (`work/_…/`).
"""

from __future__ import annotations

from fusionfleet.key_format import KeyFormat
from fusionfleet.layout import WORK_PREFIX

JOB_INDEX_PREFIX = f"{WORK_PREFIX}_jobs/"
JOB_INDEX_END = 10**13
JOB_INDEX_FILE = KeyFormat(JOB_INDEX_PREFIX + "{rank:013d}-{job}.json")


def job_index_key(job_id: str, submitted_ms: int) -> str:
    rank = max(0, min(JOB_INDEX_END - 1, JOB_INDEX_END - 1 - submitted_ms))
    return JOB_INDEX_FILE.key(rank=rank, job=job_id)


def parse_job_index_key(key: str) -> str | None:
    """The job of a `job_index_key`, or None."""
    found = JOB_INDEX_FILE.parse(key)
    return str(found["job"]) if found else None
